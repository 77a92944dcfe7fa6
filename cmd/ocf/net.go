package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/router"
)

// newNetCmd builds `net`: the running router's state, and the last
// upgrade's outcome as the boot left it.
func newNetCmd() *cobra.Command {
	return statusView("net", "Show the router: ports, addresses, the WAN, leases, firewall counters, SSH, recent events",
		func(st *router.Status) any { return st },
		func(st *router.Status, w io.Writer) error {
			if err := st.WriteText(w); err != nil {
				return err
			}
			if b, err := os.ReadFile(boot.UpgradeStatusFile); err == nil {
				fmt.Fprintf(w, "%s", b)
			}
			return nil
		})
}
