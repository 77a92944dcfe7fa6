// Package isp6 is an ISP's IPv6 side in the world VM (issue 30): ISC
// dhcpd -6 delegating prefixes and radvd advertising the WAN link's
// prefix and default route, both Debian bookworm's i386 builds,
// unmodified, as an ISP's access router would run them. The router
// tests in the host's namespaces use the host's dhcpd and radvd; this is
// for a booted board image, whose WAN is a QEMU link into the world.
//
// Fetch downloads the packages with apt-get into the ocfw cache and
// unpacks them into a tree (worldvm.FetchTree) that worldvm's
// Config.Trees puts at the guest's /. Start writes the configurations
// and starts both in one of the world's namespaces.
//
// Test-only: nothing here reaches a router image.
package isp6

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// Packages are the servers and what they need: both link only libc
// (objdump -p: NEEDED libc.so.6); their maintainer scripts' dependencies
// (debconf, adduser, lsb-base) have no use in a tree the agent runs.
var Packages = []string{"isc-dhcp-server", "radvd", "libc6", "libgcc-s1"}

// Guest paths of the programs, as Debian installs them.
const (
	Dhcpd = "/usr/sbin/dhcpd"
	Radvd = "/usr/sbin/radvd"
)

// LibraryPath is the tree's library directories, for LD_LIBRARY_PATH:
// the guest has no ld.so.cache.
const LibraryPath = "/lib/i386-linux-gnu:/usr/lib/i386-linux-gnu"

// Spec is the tree's recipe for worldvm.FetchTree.
var Spec = worldvm.TreeSpec{
	Name: "isp6", Packages: Packages, Keep: keep, LibraryPath: LibraryPath,
	Required: []string{Dhcpd, Radvd, "/lib/ld-linux.so.2"},
}

// keep leaves out what the guest never reads.
func keep(name string) bool {
	for _, p := range []string{"usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian",
		"lib/systemd", "usr/lib/systemd", "etc/init.d", "usr/lib/i386-linux-gnu/gconv"} {
		if name == p || strings.HasPrefix(name, p+"/") {
			return false
		}
	}
	return true
}

// Fetch returns the tree of Packages for i386 under cacheDir ("" means
// the default ocfw cache); see worldvm.FetchTree.
func Fetch(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (*worldvm.Tree, error) {
	return worldvm.FetchTree(ctx, cacheDir, Spec, logf)
}

// ISP is the IPv6 side of one WAN link in the world.
type ISP struct {
	// NS and Interface are the world's namespace and its link to the
	// router's WAN port.
	NS, Interface string
	// Link is the WAN link's /64 and Addr the ISP's address on it: radvd
	// advertises Link (on-link, SLAAC) with a default route.
	Link netip.Prefix
	Addr netip.Addr
	// Pool is where delegated prefixes come from (dhcpd's prefix6
	// range), each PDLength long.
	Pool     netip.Prefix
	PDLength int
	// DNS is the resolver dhcpd names (option dhcp6.name-servers) and
	// radvd's RDNSS; the zero Addr names none.
	DNS netip.Addr
}

// DhcpdConf is dhcpd -6's configuration: a subnet6 for the link (dhcpd
// serves only interfaces with an address in a declared subnet) that
// delegates PDLength prefixes out of Pool, short lifetimes so that a
// test sees renewals.
func (i ISP) DhcpdConf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "default-lease-time 600;\nmax-lease-time 1200;\npreferred-lifetime 450;\n")
	if i.DNS.IsValid() {
		fmt.Fprintf(&b, "option dhcp6.name-servers %s;\n", i.DNS)
	}
	first := i.Pool.Addr()
	last := lastPrefix(i.Pool, i.PDLength)
	fmt.Fprintf(&b, "subnet6 %s {\n\tprefix6 %s %s /%d;\n}\n", i.Link, first, last, i.PDLength)
	return b.String()
}

// lastPrefix is the start of the last pd-long prefix in pool.
func lastPrefix(pool netip.Prefix, pd int) netip.Addr {
	a := pool.Masked().Addr().As16()
	// Set the bits between the pool's length and pd.
	for bit := pool.Bits(); bit < pd; bit++ {
		a[bit/8] |= 0x80 >> (bit % 8)
	}
	return netip.AddrFrom16(a)
}

// RadvdConf is radvd's configuration: the link's prefix for SLAAC, a
// default route (router lifetime 1800 s), neither M nor O: the router
// asks for its prefix by DHCPv6 whatever the flags (RFC 7084 WPD-1).
func (i ISP) RadvdConf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "interface %s {\n\tAdvSendAdvert on;\n\tMinRtrAdvInterval 3;\n\tMaxRtrAdvInterval 10;\n\tAdvDefaultLifetime 1800;\n", i.Interface)
	fmt.Fprintf(&b, "\tprefix %s {\n\t\tAdvOnLink on;\n\t\tAdvAutonomous on;\n\t};\n", i.Link)
	if i.DNS.IsValid() {
		fmt.Fprintf(&b, "\tRDNSS %s {\n\t};\n", i.DNS)
	}
	b.WriteString("};\n")
	return b.String()
}

// Doer runs one agent command and fails the test on an error
// (worldvm's MustDo bound to a test).
type Doer func(cmd string) string

// Start gives the ISP its address, writes both configurations under
// /etc/isp6-NS and starts dhcpd -6 and radvd in the namespace (kept by
// the agent as dhcpd6-NS and radvd-NS; worldvm's output command shows
// their logs).
func (i ISP) Start(do Doer) {
	dir := "/etc/isp6-" + i.NS
	do(fmt.Sprintf("addr %s %s %s/%d", i.NS, i.Interface, i.Addr, i.Link.Bits()))
	// radvd refuses to advertise unless the namespace forwards v6.
	do("sysctl " + i.NS + " net.ipv6.conf.all.forwarding 1")
	do("write " + dir + "/dhcpd6.conf " + worldvm.Quote(i.DhcpdConf()))
	do("write " + dir + "/dhcpd6.leases " + worldvm.Quote(""))
	do("write " + dir + "/radvd.conf " + worldvm.Quote(i.RadvdConf()))
	// radvd refuses a configuration file not owned by its user, which
	// it looks up by name (root without -u): the world has no passwd.
	do("write /etc/passwd " + worldvm.Quote("root:x:0:0:root:/:/nonexistent\n"))
	env := "LD_LIBRARY_PATH=" + LibraryPath
	do(fmt.Sprintf("start %s dhcpd6-%s %s %s -6 -f -d -cf %s/dhcpd6.conf -lf %s/dhcpd6.leases -pf %s/dhcpd6.pid %s",
		i.NS, i.NS, env, Dhcpd, dir, dir, dir, i.Interface))
	do(fmt.Sprintf("start %s radvd-%s %s %s -n -m stderr -C %s/radvd.conf -p %s/radvd.pid",
		i.NS, i.NS, env, Radvd, dir, dir))
}

// LinkLocal is the link-local address the kernel gives an interface
// with this MAC (EUI-64, RFC 4291 appendix A; addr_gen_mode 0): the next
// hop the ISP routes a router's delegated prefixes to (dhcpd -6 installs
// no routes).
func LinkLocal(mac string) (netip.Addr, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return netip.Addr{}, fmt.Errorf("isp6: MAC %q: not a 48-bit MAC", mac)
	}
	a := [16]byte{0: 0xfe, 1: 0x80, 8: hw[0] ^ 2, 9: hw[1], 10: hw[2], 11: 0xff, 12: 0xfe, 13: hw[3], 14: hw[4], 15: hw[5]}
	return netip.AddrFrom16(a), nil
}
