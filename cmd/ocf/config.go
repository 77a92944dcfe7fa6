package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

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
		&cobra.Command{
			Use:   "confirm",
			Short: "Keep the provisional config (over a new SSH connection)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				r, err := config.Call(config.Socket, config.Request{Op: "confirm", Conn: os.Getenv(sshd.ConnEnv)})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), r.Message)
				return nil
			},
		},
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
