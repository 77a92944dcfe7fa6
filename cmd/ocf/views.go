package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/store"
)

// statusView builds a command that shows the running router's status,
// or a part of it: as text by text, or with --json as the JSON of what
// part picks. Each asks the router's status socket once.
func statusView(use, short string, part func(*router.Status) any, text func(*router.Status, io.Writer) error) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := router.ReadStatus(router.StatusSocket)
			if err != nil {
				return err
			}
			if asJSON {
				e := json.NewEncoder(cmd.OutOrStdout())
				e.SetIndent("", "  ")
				return e.Encode(part(st))
			}
			return text(st, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// newClientsCmd builds `clients`: the LAN's DHCP clients.
func newClientsCmd() *cobra.Command {
	return statusView("clients", "Show the LAN's DHCP clients: address, MAC, host name, when the lease ends",
		func(st *router.Status) any { return st.Clients },
		func(st *router.Status, w io.Writer) error { return st.WriteClients(w, time.Now()) })
}

// newFirewallCmd builds `firewall`: the ruleset the kernel runs, each
// rule with its packet and byte counters.
func newFirewallCmd() *cobra.Command {
	return statusView("firewall", "Show the firewall's rules, chain by chain, with the packets and bytes each decided",
		func(st *router.Status) any { return st.Firewall },
		(*router.Status).WriteFirewall)
}

// logFlags are `log`'s.
type logFlags struct {
	follow bool
	lines  int
	every  time.Duration
}

// newLogCmd builds `log`: the router's log as the card keeps it (the
// store's log ring), read from the data partition without mounting it.
func newLogCmd(root *rootFlags) *cobra.Command {
	f := &logFlags{}
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Print the log kept on the card; -f follows it",
		Long: `log prints the router's log as the card keeps it, oldest first, in UTC. The
router writes its lines to the card in batches, so the newest may take a few
seconds to appear. -f keeps printing lines as they reach the card (Ctrl-C ends).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.lines < 0 {
				return fmt.Errorf("-n %d: want 0 (all) or more", f.lines)
			}
			p, err := root.loadPlan()
			if err != nil {
				return err
			}
			if p == nil {
				return fmt.Errorf("no plan (%s): not on a board, so no card to read", root.planFile)
			}
			dev, err := boot.FindLabel("/sys/class/block", "/dev", p.DataPartitionLabel())
			if err != nil {
				return fmt.Errorf("the card's data partition: %w", err)
			}
			return followLog(cmd.OutOrStdout(), func() ([]store.LogLine, error) { return readCardLog(dev) }, f)
		},
	}
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing new lines as they reach the card")
	cmd.Flags().IntVarP(&f.lines, "lines", "n", 0, "print only the last N lines first (0: all)")
	f.every = 2 * time.Second
	return cmd
}

// readCardLog reads the log ring from the data partition dev, read-only.
func readCardLog(dev string) ([]store.LogLine, error) {
	fd, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	size, err := fd.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dev, err)
	}
	st, err := store.Open(fd, size, store.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dev, err)
	}
	return st.Contents().Log, nil
}

// followLog prints what read returns (the last f.lines of it, if set),
// then, with f.follow, polls every f.every for lines with a higher
// sequence number, until a write fails.
func followLog(w io.Writer, read func() ([]store.LogLine, error), f *logFlags) error {
	lines, err := read()
	if err != nil {
		return err
	}
	if f.lines > 0 && len(lines) > f.lines {
		lines = lines[len(lines)-f.lines:]
	}
	last, err := writeLog(w, lines, 0)
	if err != nil || !f.follow {
		return err
	}
	for {
		time.Sleep(f.every)
		lines, err := read()
		if err != nil {
			return err
		}
		if last, err = writeLog(w, lines, last); err != nil {
			return err
		}
	}
}

// writeLog prints the lines whose sequence number is above after, one a
// line with its UTC time, and returns the highest printed (or after).
// The text is escaped again (store.Printable): the log holds what came
// from the network.
func writeLog(w io.Writer, lines []store.LogLine, after uint64) (uint64, error) {
	for _, l := range lines {
		if l.Seq <= after {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", l.Time.UTC().Format("2006-01-02 15:04:05"), store.Printable(l.Text)); err != nil {
			return after, err
		}
		after = l.Seq
	}
	return after, nil
}
