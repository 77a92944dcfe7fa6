package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/router/sshd"
)

// newConfigCmd builds `config`: a site config pushed over SSH (ocfw push).
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Stage, apply, confirm a pushed site config (what ocfw push runs)",
		Long: `config changes the running router's site config without a reboot. stage unpacks
a tar of site.json and key files from stdin into ` + config.StagingDir + ` (RAM);
apply checks it and applies it live, provisionally; confirm, over a new SSH
connection, keeps it; without a confirm in time the box goes back to the
previous config by itself. A power cut at any moment boots the old or the new
config, whole.`,
	}
	var within time.Duration
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Check the staged config and apply it, provisional until confirmed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			siteJSON, files, err := config.ReadStaged(config.StagingDir)
			if err != nil {
				return err
			}
			r, err := config.Call(config.Socket, config.Request{Op: "apply",
				Apply: &config.ApplyRequest{Site: siteJSON, Files: files, Within: within, Conn: os.Getenv(sshd.ConnEnv)}})
			if err != nil {
				return fmt.Errorf("refused by the box:\n%w", err)
			}
			os.RemoveAll(config.StagingDir)
			fmt.Fprintln(cmd.OutOrStdout(), r.Message)
			return nil
		},
	}
	apply.Flags().DurationVar(&within, "confirm-within", config.DefaultWithin, fmt.Sprintf("roll back unless confirmed within this long (%v to %v)", config.MinWithin, config.MaxWithin))
	cmd.AddCommand(
		&cobra.Command{
			Use:   "stage",
			Short: "Unpack a bundle (tar of site.json and key files) from stdin into " + config.StagingDir,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				names, err := config.Stage(config.StagingDir, cmd.InOrStdin())
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "staged %v in %s\n", names, config.StagingDir)
				return nil
			},
		},
		apply,
		newConfirmCmd(stdinTerminal),
		&cobra.Command{
			Use:   "status",
			Short: "Say what was pushed last and what the box boots",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				r, err := config.Call(config.Socket, config.Request{Op: "status"})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), r.Message)
				return nil
			},
		},
	)
	return cmd
}

// newConfirmCmd builds `config confirm N`: it keeps pushed config N and
// no other, so a push whose config a power cut rolled back cannot keep
// a config pushed since (the box says which one waits). Without N it
// keeps whichever waits, but only for a person at a terminal, who reads
// which one it was: a script must say what it pushed.
func newConfirmCmd(terminal func() bool) *cobra.Command {
	return &cobra.Command{
		Use:   "confirm [N]",
		Short: "Keep provisional pushed config N (over a new SSH connection)",
		Long: `confirm keeps pushed config N, the one 'ocf config apply' and 'ocf config status'
name, over a new SSH connection: only a new login proves the new config lets you
in. Any other generation is refused, and nothing is confirmed. Without N, at a
terminal, it keeps the config that waits and names it.`,
		Example: "  ocf config confirm 5",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			gen := 0
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return fmt.Errorf("confirm %q: give the pushed config's number (1 or more), as ocf config status shows it", args[0])
				}
				gen = n
			} else if !terminal() {
				return errors.New("confirm: name the pushed config to keep (ocf config confirm N; ocf config status shows N): without a terminal nobody sees which one a bare confirm would keep")
			}
			r, err := config.Call(config.Socket, config.Request{Op: "confirm", Conn: os.Getenv(sshd.ConnEnv), Gen: gen})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r.Message)
			return nil
		},
	}
}

// stdinTerminal says whether stdin is a terminal (a person typing).
func stdinTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}
