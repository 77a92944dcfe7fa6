package ipsec

import (
	"net/netip"
	"testing"

	"github.com/ocfw/ocfw/router/netns"
)

// netNS is a network namespace made for a guest test (package
// router/netns), with test-failing helpers. Only used inside the
// kerneltest guest: the host's namespaces are never touched.
type netNS struct {
	*netns.NS
	fd int
}

func newNetNS(t *testing.T, name string) *netNS {
	t.Helper()
	ns, err := netns.New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return &netNS{NS: ns, fd: ns.FD()}
}

// do runs f inside the namespace; sockets f opens stay in it.
func (ns *netNS) do(f func() error) error { return ns.Do(f) }

// link joins a and b with a veth pair, gives each end its address and
// brings both up.
func link(t *testing.T, a *netNS, aName, aAddr string, b *netNS, bName, bAddr string) {
	t.Helper()
	if err := netns.Veth(a.NS, aName, aAddr, b.NS, bName, bAddr); err != nil {
		t.Fatal(err)
	}
}

// route adds a route in ns: to dst ("default" or a prefix) via gw.
func (ns *netNS) route(t *testing.T, dst, gw string) {
	t.Helper()
	if err := ns.Route(dst, netip.MustParseAddr(gw), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
}

// sysctl writes a /proc/sys file inside ns.
func (ns *netNS) sysctl(t *testing.T, path, val string) {
	t.Helper()
	if err := ns.Sysctl(path, val); err != nil {
		t.Fatal(err)
	}
}
