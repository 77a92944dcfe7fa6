package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ocfw/ocfw/router/ctlsock"
	"github.com/ocfw/ocfw/store"
)

// StatusSocket is where the router answers `ocf net`.
const StatusSocket = "/run/ocfw/router.sock"

// ServeStatus answers every connection on a unix socket at path with the
// status as JSON, until ctx is done.
func (r *Router) ServeStatus(ctx context.Context, path string) error {
	return ctlsock.Serve(ctx, path, 5*time.Second, func(*json.Decoder) any { return r.Status() })
}

// ReadStatus asks the running router for its status.
func ReadStatus(path string) (*Status, error) {
	var st Status
	if err := ctlsock.Call(path, 5*time.Second, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// WriteText prints the status for people. What came from the network
// (lease host names, events, errors) is escaped (store.Printable): it
// must not drive the terminal `ocf net` runs in, nor forge a line.
func (st *Status) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s, up %s\n", store.Printable(st.Hostname), st.Uptime)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "interface\tstate\tmac\tmtu\taddresses\trx/tx bytes")
	for _, l := range st.Links {
		state := "down"
		switch {
		case l.Up && l.Carrier:
			state = "up"
		case l.Up:
			state = "no carrier"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d/%d\n", l.Name, state, l.MAC, l.MTU, strings.Join(l.Addrs, " "), l.RxBytes, l.TxBytes)
	}
	tw.Flush()
	fmt.Fprintf(w, "WAN %s: %s\n", st.WAN.Interface, st.wanText())
	if st.LAN != "" {
		fmt.Fprintf(w, "LAN %s\n", st.LAN)
	}
	if v := st.IPv6; v != nil {
		fmt.Fprintf(w, "IPv6 %s: LAN %s", v.Mode, strings.Join(v.LAN, " "))
		if v.Delegated != "" {
			fmt.Fprintf(w, ", delegated %s", v.Delegated)
			if v.Expires != "" {
				fmt.Fprintf(w, " until %s", v.Expires)
			}
		}
		if v.WAN != "" {
			fmt.Fprintf(w, ", WAN %s", v.WAN)
		}
		if v.ISP != "" {
			fmt.Fprintf(w, ", ISP's RA %s", v.ISP)
		}
		if len(v.DNS) > 0 {
			fmt.Fprintf(w, ", DNS %s", strings.Join(v.DNS, " "))
		}
		fmt.Fprintln(w)
	}
	for _, k := range sortedKeys(st.Services) {
		fmt.Fprintf(w, "service %s: %s\n", k, store.Printable(st.Services[k]))
	}
	for _, t := range st.Tunnels {
		t.writeText(w)
	}
	if st.SSH != "" {
		fmt.Fprintf(w, "SSH host key %s\n", st.SSH)
	}
	if m := st.Memory; m.Total > 0 {
		fmt.Fprintf(w, "memory: firmware process %d KiB (peak %d), initramfs and other shared %d KiB, %d of %d KiB available\n",
			m.ProcessRSS, m.ProcessPeak, m.Shared, m.Available, m.Total)
	}
	for _, l := range st.Leases {
		fmt.Fprintf(w, "lease %s\n", store.Printable(l))
	}
	for _, k := range sortedKeys(st.Counters) {
		fmt.Fprintf(w, "counter %s: %d\n", k, st.Counters[k])
	}
	if len(st.Events) > 0 {
		fmt.Fprintln(w, "recent events:")
		for _, e := range st.Events {
			fmt.Fprintf(w, "  %s\n", store.Printable(e))
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// writeText prints a tunnel: what it joins and its state, then for a
// manual tunnel each direction's SA counters while it is up, for an
// IKEv2 tunnel each IKE SA and its CHILD SAs with theirs.
func (t TunnelState) writeText(w io.Writer) {
	keying := fmt.Sprintf("%s %s", t.Cipher, t.Auth)
	if t.Driver != "" {
		keying += " (driver " + t.Driver + ")"
	}
	keying += ", keys " + t.Keys
	if t.Keying == "ikev2" {
		keying = "ikev2, psk " + t.PSK
	}
	fmt.Fprintf(w, "tunnel %s: %s; peer %s, %s <-> %s, %s\n", t.Name, t.State, t.Peer,
		orDash(t.LocalSubnet), t.RemoteSubnet, keying)
	writeSAs(w, "  ", t.Out, t.In)
	for _, sa := range t.IKE {
		sa.writeText(w)
	}
	if t.Problem != "" {
		fmt.Fprintf(w, "  %s\n", t.Problem)
	}
	if t.Out != nil && t.In != nil && t.Out.Packets > 0 && t.In.Packets == 0 {
		fmt.Fprintf(w, "  nothing received from the peer yet\n")
	}
}

// writeSAs prints each direction's SA counters, indented.
func writeSAs(w io.Writer, indent string, out, in *SAState) {
	for _, d := range []struct {
		dir string
		sa  *SAState
	}{{"out", out}, {"in ", in}} {
		if d.sa == nil {
			continue
		}
		fmt.Fprintf(w, "%s%s spi %s: %d packets, %d bytes, %d errors", indent, d.dir, d.sa.SPI, d.sa.Packets, d.sa.Bytes, d.sa.Errors)
		if d.sa.Errors > 0 {
			fmt.Fprintf(w, " (replayed %d, outside the window %d, integrity failed %d)", d.sa.ReplayDrops, d.sa.WindowDrops, d.sa.IntegrityFailed)
		}
		fmt.Fprintln(w)
	}
}

// writeText prints an IKE SA on one line (what is known of it only),
// then its CHILD SAs.
func (sa IKEState) writeText(w io.Writer) {
	head := fmt.Sprintf("  IKE SA %s (%s)", sa.State, sa.Role)
	if sa.PeerID != "" {
		head += " with " + store.Printable(sa.PeerID)
	}
	if sa.Remote != "" {
		head += " at " + sa.Remote
	}
	var parts []string
	if sa.Proposal != "" {
		head += ": " + sa.Proposal
	}
	if sa.Established != "" {
		t := "up since " + sa.Established
		if sa.LastRekey != "" {
			t += ", last rekey " + sa.LastRekey
		}
		parts = append(parts, t)
	}
	for _, p := range []string{sa.Liveness, sa.NAT, sa.Error} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) > 0 {
		head += "; " + strings.Join(parts, "; ")
	}
	fmt.Fprintln(w, head)
	for _, c := range sa.Children {
		line := "    CHILD SA " + c.Proposal
		if c.Driver != "" {
			line += ", cipher on " + c.Driver
		}
		if c.Encap != "" {
			line += ", ESP in " + c.Encap
		}
		if c.Rekeyed {
			line += ", rekeyed (its delete is on the way)"
		}
		if c.Error != "" {
			line += "; " + c.Error
		}
		fmt.Fprintln(w, line)
		writeSAs(w, "      ", c.Out, c.In)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
