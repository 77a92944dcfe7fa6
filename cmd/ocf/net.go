package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

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
			return st.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
