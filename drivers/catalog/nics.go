package catalog

// NIC is an Ethernet driver a board profile may name for its ports.
type NIC struct {
	// Module is the kernel module (as modprobe names it).
	Module string `json:"module"`
	Bus    Bus    `json:"bus"`
	// PCI lists the chips it drives (PCI NICs).
	PCI []PCIID `json:"pci,omitempty"`
	// Needs is what it needs beyond the module, for people.
	Needs string `json:"needs,omitempty"`
	Note  string `json:"note,omitempty"`
}

// nics are the board NICs and QEMU's stand-in.
var nics = []NIC{
	{Module: "via_rhine", Bus: BusPCI, PCI: []PCIID{{0x1106, 0x3053, "VIA VT6105M Rhine III"}, {0x1106, 0x3106, "VIA VT6105 Rhine III"}},
		Note: "the ALIX and net5501 ports; QEMU emulates no VIA Rhine"},
	{Module: "ixp4xx_eth", Bus: BusPlatform,
		Needs: "the NPE microcode (NPE-B for the first port, NPE-C for the second) in /lib/firmware, which Intel's licence keeps out of Debian and ocfw: give it to ocfw build as a firmware file",
		Note:  "IXP4xx NPE Ethernet; without the microcode the port does not come up and the router runs without it"},
	{Module: "e1000", Bus: BusPCI, PCI: []PCIID{{0x8086, 0x100e, "Intel 82540EM (QEMU's e1000)"}},
		Note: "QEMU's emulated NIC: x86 images carry it so that ocfw run has ports"},
}

// QEMUNIC is the NIC module x86 images carry for ocfw run.
const QEMUNIC = "e1000"

// LookupNIC finds a NIC driver by module name (dashes and underscores are
// the same, as for modprobe).
func LookupNIC(module string) (*NIC, bool) {
	m := normalModule(module)
	for i := range nics {
		if nics[i].Module == m {
			return &nics[i], true
		}
	}
	return nil, false
}

// NICModules lists the NIC modules the catalog knows.
func NICModules() []string {
	var out []string
	for _, n := range nics {
		out = append(out, n.Module)
	}
	return out
}

func normalModule(m string) string {
	b := []byte(m)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

// RouterModule is a kernel module the router needs, with why.
type RouterModule struct {
	Name string
	For  string
}

// RouterModules are what the router's firewall, NAT and LAN bridge need
// beyond the NIC drivers, in load order (the board has no modprobe to
// follow soft dependencies: crc32c_generic must come before libcrc32c,
// which nf_tables needs). The rest of their dependencies come from
// modules.dep. In Debian's 686 kernel all are modules; af_packet (DHCP)
// and ipv6 are built in. router/firewall's test checks this list holds
// everything its Modules names.
var RouterModules = []RouterModule{
	{"crc32c_generic", "CRC32C, before libcrc32c (a soft dependency)"},
	{"libcrc32c", "for nf_tables"},
	{"nfnetlink", "netlink for nftables"},
	{"nf_tables", "nftables: the firewall"},
	{"nft_objref", "nftables: named counters (drops, port forwards)"},
	{"nf_defrag_ipv4", "connection tracking"},
	{"nf_defrag_ipv6", "connection tracking"},
	{"nf_conntrack", "connection tracking: stateful firewall, NAT"},
	{"nft_ct", "nftables: connection state (established, related, dnat)"},
	{"nf_nat", "NAT"},
	{"nft_chain_nat", "nftables: NAT chains"},
	{"nft_nat", "nftables: DNAT for port forwards"},
	{"nft_masq", "nftables: masquerade out of the WAN"},
	{"nft_limit", "nftables: rate limits (pings)"},
	{"nft_fib", "nftables: the IPv6 reverse-path check (fib)"},
	{"nft_fib_ipv4", "nftables: fib, IPv4 half"},
	{"nft_fib_ipv6", "nftables: fib, IPv6 half"},
	{"nft_fib_inet", "nftables: fib in the inet table"},
	{"bridge", "the LAN bridge when a site puts several ports on the LAN"},
}

// TunnelModules are what the site's IPsec tunnels (router/ipsec) need, in
// load order, which matters without modprobe: adding an SA fails with
// ENOENT until drbg is loaded (ESP's IV generators seed from the default
// RNG), and drbg needs ctr and sha512_generic before it; authencesn is
// the template of SAs with extended sequence numbers. cbc, hmac,
// sha1_generic and sha256_generic are built into Debian's 686 kernel and
// skipped there. Every router image has them, tunnels or not: a site.json
// on the card may add tunnels without a new build, and they cost 213 KiB
// of modules (64 KiB in the xz initramfs) on the 686 kernel, plus esp6's
// 22 KiB. esp6 is ESP whose outer header is IPv6; IPv6 networks over an
// IPv4 WAN need only esp4 (the kernel's ipv6 is built in).
// router/ipsec.Modules is this list's names.
var TunnelModules = []RouterModule{
	{"ctr", "CTR mode, before drbg (IPsec)"},
	{"sha512_generic", "SHA-512, before drbg (IPsec)"},
	{"drbg", "the kernel's default RNG: ESP's IVs (IPsec)"},
	{"cbc", "CBC mode (IPsec)"},
	{"hmac", "HMAC (IPsec)"},
	{"sha1_generic", "SHA-1 for hmac-sha1 (IPsec)"},
	{"sha256_generic", "SHA-256 for hmac-sha256 (IPsec)"},
	{"des_generic", "3DES for des-ede3-cbc (IPsec)"},
	{"xfrm_algo", "XFRM algorithms (IPsec)"},
	{"xfrm_user", "XFRM netlink: SAs and policies (IPsec)"},
	{"esp4", "ESP over IPv4 (IPsec)"},
	{"esp6", "ESP over IPv6: tunnels between IPv6 WAN addresses (IPsec)"},
	{"authenc", "cipher+HMAC as one transform (IPsec)"},
	{"authencesn", "authenc with extended sequence numbers (IPsec)"},
	{"echainiv", "ESP's IV generator (IPsec)"},
	{"seqiv", "IV generator (IPsec)"},
}

// TunnelModuleNames are TunnelModules' names, in order.
func TunnelModuleNames() []string {
	var out []string
	for _, m := range TunnelModules {
		out = append(out, m.Name)
	}
	return out
}
