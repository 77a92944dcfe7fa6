package dhcp

import (
	"fmt"
	"strings"
)

// String leaves out what the server did not give: a lease without a
// router must not read "router invalid IP" (netip.Addr's text for no
// address), as it did on QEMU's restricted user network.
func (l *WANLease) String() string {
	if l == nil {
		return "no lease"
	}
	parts := []string{l.Address.String()}
	if l.Router.IsValid() {
		parts = append(parts, "router "+l.Router.String())
	} else {
		parts = append(parts, "no router")
	}
	if len(l.DNS) > 0 {
		parts = append(parts, fmt.Sprintf("DNS %v", l.DNS))
	} else {
		parts = append(parts, "no DNS")
	}
	if l.Server.IsValid() {
		parts = append(parts, "from "+l.Server.String())
	}
	parts = append(parts, "for "+shortDuration(l.LeaseTime))
	return strings.Join(parts, " ")
}
