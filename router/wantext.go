package router

import (
	"strings"
	"time"

	"github.com/ocfw/ocfw/router/dhcp"
)

// wanText is `ocf net`'s WAN line after "WAN IF: ", leaving out what the
// WAN does not have: a DHCP lease without gateway or DNS read
// "10.0.2.15/24 via , DNS  (dhcp)".
func (st *Status) wanText() string {
	if st.WAN.Address == "" {
		return "no address yet"
	}
	parts := []string{st.WAN.Address}
	if st.WAN.Gateway != "" {
		parts = append(parts, "via "+st.WAN.Gateway)
	} else {
		parts = append(parts, "no gateway")
	}
	s := strings.Join(parts, " ")
	if len(st.WAN.DNS) > 0 {
		s += ", DNS " + strings.Join(st.WAN.DNS, " ")
	} else {
		s += ", no DNS"
	}
	if st.WAN.Source != "" {
		s += " (" + st.WAN.Source + ")"
	}
	return s
}

// dhcpClientState is the WAN DHCP client's line in `ocf net`: it follows
// the lease, so a bound WAN no longer reads "asking".
func dhcpClientState(ifname string, l *dhcp.WANLease) string {
	if l == nil {
		return "asking on " + ifname
	}
	return "bound on " + ifname + ": " + l.String() + ", since " + l.Acquired.UTC().Format(time.RFC3339)
}
