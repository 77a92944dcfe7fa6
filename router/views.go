package router

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ocfw/ocfw/router/dhcp"
	"github.com/ocfw/ocfw/router/firewall"
	"github.com/ocfw/ocfw/store"
)

// Views are the parts of the status that `ocf clients` and `ocf
// firewall` show: the LAN's DHCP clients and the ruleset with each
// rule's counter.
type Views struct {
	Clients  []dhcp.Lease            `json:"clients,omitempty"`
	Firewall []firewall.ChainListing `json:"firewall,omitempty"`
}

// WriteClients prints the LAN's DHCP clients, one a line: address, MAC,
// host name (as the client sent it, escaped), and when the lease ends
// as of now. Host names come from the network: store.Printable keeps
// them from driving the terminal.
func (st *Status) WriteClients(w io.Writer, now time.Time) error {
	if len(st.Clients) == 0 {
		_, err := fmt.Fprintln(w, "no DHCP clients")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "address\tmac\thostname\tlease")
	for _, l := range st.Clients {
		host := store.Printable(l.Hostname)
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.IP, store.Printable(l.MAC), host, leaseState(l, now))
	}
	return tw.Flush()
}

func leaseState(l dhcp.Lease, now time.Time) string {
	switch {
	case l.Static:
		return "static"
	case l.Released:
		return "released"
	case !l.Expires.After(now):
		return "expired " + l.Expires.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("until %s (%s left)", l.Expires.UTC().Format(time.RFC3339), l.Expires.Sub(now).Round(time.Second))
}

// WriteFirewall prints the ruleset as the kernel runs it, chain by
// chain, each rule with the packets and bytes it decided since the
// firewall was last applied.
func (st *Status) WriteFirewall(w io.Writer) error {
	if len(st.Firewall) == 0 {
		_, err := fmt.Fprintln(w, "no firewall: the router applied none (no site config, or it failed: see ocf net)")
		return err
	}
	for i, ch := range st.Firewall {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "chain %s (hook %s, policy %s)\n", ch.Name, ch.Hook, ch.Policy)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "packets\tbytes\t")
		for _, r := range ch.Rules {
			fmt.Fprintf(tw, "%d\t%d\t  %s\n", r.Packets, r.Bytes, store.Printable(r.Rule))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
