package router

import (
	"net/netip"

	"github.com/ocfw/ocfw/router/dns"
	"github.com/ocfw/ocfw/site"
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
	// The router's own v6 addresses, then the site's v6 hosts in each
	// of the LAN's /64s (ULA and delegated): AAAA answers.
	r.svc.mu.Lock()
	n := r.svc.lan6
	r.svc.mu.Unlock()
	var lan6 []netip.Prefix
	if n != nil {
		lan6, _ = n.status()
	}
	for _, a := range lan6 {
		out = append(out, dns.Host{Name: s.Hostname, Addr: a.Addr()})
	}
	for _, st := range s.LAN.DHCP.Static {
		if a, err := netip.ParseAddr(st.IP); err == nil && st.Name != "" {
			out = append(out, dns.Host{Name: st.Name, Addr: a})
		}
	}
	for _, h := range s.IPv6.Hosts {
		id, err := netip.ParseAddr(h.ID)
		if err != nil || h.Name == "" {
			continue
		}
		for _, a := range lan6 {
			out = append(out, dns.Host{Name: h.Name, Addr: site.WithID(a.Masked(), id)})
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
