package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/router"
)

// newNetCmd builds `net`: the running router's state.
func newNetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "net",
		Short: "Show the router: ports, addresses, the WAN, leases, firewall counters, SSH, recent events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := router.ReadStatus(router.StatusSocket)
			if err != nil {
				return err
			}
			if asJSON {
				e := json.NewEncoder(cmd.OutOrStdout())
				e.SetIndent("", "  ")
				return e.Encode(st)
			}
			if err := st.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			// The last upgrade's outcome, as the boot left it.
			if b, err := os.ReadFile(boot.UpgradeStatusFile); err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s", b)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
