package router

import (
	"net/netip"

	"github.com/ocfw/ocfw/router/dns"
)

// lanHosts are the names the LAN's DNS forwarder answers in the site's
// local domain: the router's own host name first, then the site's named
// static leases, then the DHCP server's leases with the host name each
// client sent. The forwarder takes the first entry of a name and skips
// names that are not RFC 1123 labels, so a client cannot take the
// router's or a static host's name.
func (r *Router) lanHosts() []dns.Host {
	s := r.Site()
	var out []dns.Host
	if lan, err := s.LAN.Address.Prefix(); err == nil {
		out = append(out, dns.Host{Name: s.Hostname, Addr: lan.Addr()})
	}
	for _, st := range s.LAN.DHCP.Static {
		if a, err := netip.ParseAddr(st.IP); err == nil && st.Name != "" {
			out = append(out, dns.Host{Name: st.Name, Addr: a})
		}
	}
	r.svc.mu.Lock()
	srv := r.svc.dhcp
	r.svc.mu.Unlock()
	if srv != nil {
		for _, l := range srv.Leases() {
			if l.Hostname != "" && !l.Released {
				out = append(out, dns.Host{Name: l.Hostname, Addr: l.IP})
			}
		}
	}
	return out
}
