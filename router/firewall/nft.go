package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Modules are the kernel modules the ruleset needs, in load order, as
// Debian's 6.1 kernels build them (all =m). The firmware has no modprobe,
// and nf_tables asks for a missing expression's module by name, so every
// one must be loaded before Apply. crc32c_generic comes first because
// libcrc32c only names it as a soft dependency (modules.dep leaves it
// out) and fails to load without a crc32c implementation. The counter,
// meta, payload, cmp, bitwise and immediate expressions are built into
// nf_tables; objref (named counters), ct, nat, masq and limit are not,
// nor fib (the v6 reverse-path check: "fib saddr . iif oif missing" in
// an inet table needs all four of its modules).
var Modules = []string{
	"crc32c_generic", "libcrc32c",
	"nfnetlink", "nf_tables", "nft_objref",
	"nf_defrag_ipv4", "nf_defrag_ipv6", "nf_conntrack", "nft_ct",
	"nf_nat", "nft_chain_nat", "nft_nat", "nft_masq",
	"nft_limit",
	"nft_fib", "nft_fib_ipv4", "nft_fib_ipv6", "nft_fib_inet",
}

// Option changes where Apply and Counters act.
type Option func(*options)

type options struct{ netns int }

// InNetNS makes Apply and Counters act on the network namespace the
// open file descriptor fd refers to (/proc/PID/ns/net), instead of the
// calling process's.
func InNetNS(fd int) Option { return func(o *options) { o.netns = fd } }

func conn(opts []Option) (*nftables.Conn, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	var copts []nftables.ConnOption
	if o.netns != 0 {
		copts = append(copts, nftables.WithNetNSFd(o.netns))
	}
	return nftables.New(copts...)
}

var hooks = map[string]*nftables.ChainHook{
	"prerouting":  nftables.ChainHookPrerouting,
	"input":       nftables.ChainHookInput,
	"forward":     nftables.ChainHookForward,
	"postrouting": nftables.ChainHookPostrouting,
}

// Apply replaces the router's table with rs in one nftables batch: the
// table is created (so that deleting it cannot fail on the first run),
// deleted with everything in it, and built again, and the kernel commits
// all of it or nothing. Other tables are not touched. Counters start from
// zero.
func Apply(rs *Ruleset, opts ...Option) error {
	if err := rs.check(); err != nil {
		return err
	}
	c, err := conn(opts)
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	t := &nftables.Table{Name: rs.Table, Family: nftables.TableFamilyINet}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	for _, name := range rs.Counters {
		c.AddObj(&nftables.CounterObj{Table: t, Name: name})
	}
	for _, ch := range rs.Chains {
		policy := nftables.ChainPolicyAccept
		if ch.Policy == "drop" {
			policy = nftables.ChainPolicyDrop
		}
		prio := nftables.ChainPriority(ch.Priority)
		nc := c.AddChain(&nftables.Chain{
			Name:     ch.Name,
			Table:    t,
			Type:     nftables.ChainType(ch.Type),
			Hooknum:  hooks[ch.Hook],
			Priority: &prio,
			Policy:   &policy,
		})
		for _, r := range ch.Rules {
			ex, err := r.build(true)
			if err != nil { // check above makes this unreachable
				return fmt.Errorf("firewall: chain %s: %w", ch.Name, err)
			}
			nr := &nftables.Rule{Table: t, Chain: nc, Exprs: ex}
			if r.Comment != "" {
				nr.UserData = userdata.AppendString(nil, userdata.TypeComment, r.Comment)
			}
			c.AddRule(nr)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("firewall: applying table inet %s: %w (are the modules in firewall.Modules loaded?)", rs.Table, err)
	}
	return nil
}

// Counters reads the named counters of the router's table, sorted by
// name: packets and bytes since the last Apply.
func Counters(opts ...Option) ([]Counter, error) {
	c, err := conn(opts)
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	objs, err := c.GetObjects(&nftables.Table{Name: TableName, Family: nftables.TableFamilyINet})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("firewall: no table inet %s: the firewall was never applied", TableName)
		}
		return nil, fmt.Errorf("firewall: reading counters: %w", err)
	}
	var out []Counter
	for _, o := range objs {
		if co, ok := o.(*nftables.CounterObj); ok && co.Table != nil && co.Table.Name == TableName {
			out = append(out, Counter{Name: co.Name, Packets: co.Packets, Bytes: co.Bytes})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ChainListing is one chain of the router's table as the kernel runs it:
// its rules, each with what its counter saw since the last Apply.
type ChainListing struct {
	Name   string        `json:"name"`
	Hook   string        `json:"hook"`
	Policy string        `json:"policy"`
	Rules  []RuleListing `json:"rules"`
}

// RuleListing is one rule (its text as Rule.String writes it) and its
// counter.
type RuleListing struct {
	Rule    string `json:"rule"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Listing reads the counters of the rules rs installed (Apply) and
// pairs each with its rule, chain by chain in rs's order. The kernel
// gives a chain's rules in the order they were added, which is rs's; a
// chain whose rules the kernel has a different number of (changed by
// hand with nft) is an error rather than a wrong pairing.
func Listing(rs *Ruleset, opts ...Option) ([]ChainListing, error) {
	c, err := conn(opts)
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	t := &nftables.Table{Name: rs.Table, Family: nftables.TableFamilyINet}
	var out []ChainListing
	for _, ch := range rs.Chains {
		rules, err := c.GetRules(t, &nftables.Chain{Name: ch.Name, Table: t})
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil, fmt.Errorf("firewall: no table inet %s or chain %s: the firewall was never applied", rs.Table, ch.Name)
			}
			return nil, fmt.Errorf("firewall: reading chain %s: %w", ch.Name, err)
		}
		if len(rules) != len(ch.Rules) {
			return nil, fmt.Errorf("firewall: chain %s has %d rules in the kernel, %d as applied: changed by hand?", ch.Name, len(rules), len(ch.Rules))
		}
		cl := ChainListing{Name: ch.Name, Hook: ch.Hook, Policy: ch.Policy}
		for i, r := range ch.Rules {
			rl := RuleListing{Rule: r.String()}
			for _, e := range rules[i].Exprs {
				if ce, ok := e.(*expr.Counter); ok {
					rl.Packets, rl.Bytes = ce.Packets, ce.Bytes
				}
			}
			cl.Rules = append(cl.Rules, rl)
		}
		out = append(out, cl)
	}
	return out, nil
}

// Registers: nft's 16-byte registers 1 and 2 (NFT_REG_1, NFT_REG_2).
const (
	reg1 = 1
	reg2 = 2
)

// IPS_DST_NAT from linux/netfilter/nf_conntrack_common.h: the
// connection's destination was translated.
const ctStatusDNAT = 1 << 5

var ctStateBits = map[string]uint32{
	"invalid":     expr.CtStateBitINVALID,
	"established": expr.CtStateBitESTABLISHED,
	"related":     expr.CtStateBitRELATED,
	"new":         expr.CtStateBitNEW,
}

var l4protos = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "icmp": unix.IPPROTO_ICMP, "icmpv6": unix.IPPROTO_ICMPV6, "esp": unix.IPPROTO_ESP}

// metaKeySecPath is NFT_META_SECPATH from linux/netfilter/nf_tables.h
// (Linux 4.15 and later, with CONFIG_XFRM): whether the packet has a
// secpath, i.e. came out of an IPsec SA. Neither golang.org/x/sys nor
// google/nftables v0.3.0 names it; the meta expression takes the number
// as it is. The kernel allows it in the prerouting, input and forward
// hooks.
const metaKeySecPath expr.MetaKey = 25

// rtKeyXFRM is NFT_RT_XFRM from linux/netfilter/nf_tables.h (Linux 4.20
// and later, with CONFIG_XFRM): whether the packet's route is an IPsec
// bundle, nft's "rt ipsec exists". google/nftables v0.3.0 does not name
// it. In the forward hook the route is already the bundle when an out
// policy with its SAs matched (ip_forward looks it up first).
const rtKeyXFRM expr.RtKey = 4

var icmpTypes = map[string]byte{"echo-request": 8}

// icmpv6Types are the ICMPv6 types the v6 rules name, by nft's names
// (RFC 4443, 4861, 2710/3810).
var icmpv6Types = map[string]byte{
	"destination-unreachable": 1, "packet-too-big": 2, "time-exceeded": 3, "parameter-problem": 4,
	"echo-request": 128, "echo-reply": 129,
	"mld-listener-query": 130, "mld-listener-report": 131, "mld-listener-done": 132, "mld2-listener-report": 143,
	"nd-router-solicit": 133, "nd-router-advert": 134, "nd-neighbor-solicit": 135, "nd-neighbor-advert": 136,
}

// exprs translates the rule into nftables expressions, in the order its
// String shows them. It is pure, so the host tests check every rule Build
// makes translates.
func (r Rule) exprs() ([]expr.Any, error) { return r.build(false) }

// build is exprs, with an anonymous counter before the verdict when
// counted: what Apply installs, so that every rule counts the packets
// and bytes it decided (`ocf firewall`). A counter only counts: the
// rule matches and decides as without it.
func (r Rule) build(counted bool) ([]expr.Any, error) {
	var ex []expr.Any
	cmp := func(op expr.CmpOp, data []byte) {
		ex = append(ex, &expr.Cmp{Op: op, Register: reg1, Data: data})
	}
	meta := func(k expr.MetaKey) { ex = append(ex, &expr.Meta{Key: k, Register: reg1}) }
	if r.IIf != "" {
		meta(expr.MetaKeyIIFNAME)
		cmp(expr.CmpOpEq, ifname(r.IIf))
	}
	if r.OIf != "" {
		meta(expr.MetaKeyOIFNAME)
		cmp(expr.CmpOpEq, ifname(r.OIf))
	}
	if r.IPv4 && r.IPv6 {
		return nil, errors.New("both meta nfproto ipv4 and ipv6")
	}
	if r.IPv4 {
		meta(expr.MetaKeyNFPROTO)
		cmp(expr.CmpOpEq, []byte{unix.NFPROTO_IPV4})
	}
	if r.IPv6 {
		meta(expr.MetaKeyNFPROTO)
		cmp(expr.CmpOpEq, []byte{unix.NFPROTO_IPV6})
	}
	for _, a := range []struct {
		what   string
		p      netip.Prefix
		offset uint32
	}{{"saddr", r.SAddr, 12}, {"daddr", r.DAddr, 16}} {
		if !a.p.IsValid() {
			continue
		}
		v6 := r.IPv6 && a.p.Addr().Is6()
		if !v6 && (!r.IPv4 || !a.p.Addr().Is4()) {
			return nil, fmt.Errorf("%s %v needs an IPv4 prefix and the IPv4 match, or an IPv6 prefix and the IPv6 match", a.what, a.p)
		}
		p := a.p.Masked()
		n, offset := 4, a.offset
		if v6 {
			// IPv6 header: source at 8, destination at 24.
			n, offset = 16, 8+(a.offset-12)*4
		}
		mask := make([]byte, n)
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		addr := p.Addr().AsSlice()
		ex = append(ex,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(n)},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: uint32(n), Mask: mask, Xor: make([]byte, n)},
		)
		cmp(expr.CmpOpEq, addr)
	}
	if r.DAddrID.IsValid() {
		id := r.DAddrID.As16()
		if !r.IPv6 || !r.DAddrID.Is6() || r.DAddrID.Is4In6() || [8]byte(id[:8]) != [8]byte{} {
			return nil, fmt.Errorf("daddr interface identifier %v needs the IPv6 match and only the low 64 bits set", r.DAddrID)
		}
		// The destination (IPv6 header offset 24), its high 64 bits
		// masked off, compared with the identifier.
		mask := make([]byte, 16)
		for i := 8; i < 16; i++ {
			mask[i] = 0xff
		}
		ex = append(ex,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 16, Mask: mask, Xor: make([]byte, 16)},
		)
		cmp(expr.CmpOpEq, id[:])
	}
	if r.HopLimit255 {
		if !r.IPv6 {
			return nil, errors.New("ip6 hoplimit needs the IPv6 match")
		}
		ex = append(ex, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: 7, Len: 1})
		cmp(expr.CmpOpEq, []byte{255})
	}
	if r.FibNoRoute {
		// The output interface of the route back to the source, looked
		// up with the input interface as the route's: 0 when none.
		ex = append(ex, &expr.Fib{Register: reg1, FlagSADDR: true, FlagIIF: true, ResultOIF: true})
		cmp(expr.CmpOpEq, []byte{0, 0, 0, 0})
	}
	if r.IPsec && r.NoIPsec {
		return nil, errors.New("both meta ipsec exists and missing")
	}
	if r.IPsec || r.NoIPsec {
		// The secpath key loads one byte, 1 when the packet was
		// decrypted by an SA, as nft's "meta ipsec exists" does;
		// "missing" compares it with 0.
		meta(metaKeySecPath)
		b := byte(0)
		if r.IPsec {
			b = 1
		}
		cmp(expr.CmpOpEq, []byte{b})
	}
	if r.NoIPsecRoute {
		// One byte, 1 when the route is a bundle; missing compares with 0.
		ex = append(ex, &expr.Rt{Register: reg1, Key: rtKeyXFRM})
		cmp(expr.CmpOpEq, []byte{0})
	}
	if r.Proto != "" {
		p, ok := l4protos[r.Proto]
		if !ok {
			return nil, fmt.Errorf("unknown protocol %q", r.Proto)
		}
		if r.Proto == "icmp" && !r.IPv4 {
			return nil, errors.New("icmp needs the IPv4 match")
		}
		if r.Proto == "icmpv6" && !r.IPv6 {
			return nil, errors.New("icmpv6 needs the IPv6 match")
		}
		meta(expr.MetaKeyL4PROTO)
		cmp(expr.CmpOpEq, []byte{p})
	}
	if (r.SPort != 0 || r.DPort != 0) && r.Proto != "tcp" && r.Proto != "udp" {
		return nil, fmt.Errorf("ports need tcp or udp, not %q", r.Proto)
	}
	for _, p := range []struct {
		port   uint16
		offset uint32
	}{{r.SPort, 0}, {r.DPort, 2}} {
		if p.port != 0 {
			ex = append(ex, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: p.offset, Len: 2})
			cmp(expr.CmpOpEq, binaryutil.BigEndian.PutUint16(p.port))
		}
	}
	if r.ICMPType != "" {
		types := icmpTypes
		if r.Proto == "icmpv6" {
			types = icmpv6Types
		}
		t, ok := types[r.ICMPType]
		if !ok || (r.Proto != "icmp" && r.Proto != "icmpv6") {
			return nil, fmt.Errorf("icmp type %q: want echo-request with protocol icmp, or an ICMPv6 type the rules know with icmpv6", r.ICMPType)
		}
		ex = append(ex, &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1})
		cmp(expr.CmpOpEq, []byte{t})
	}
	if len(r.CTState) > 0 {
		var bits uint32
		for _, s := range r.CTState {
			b, ok := ctStateBits[s]
			if !ok {
				return nil, fmt.Errorf("unknown ct state %q", s)
			}
			bits |= b
		}
		ex = append(ex, ctBitsSet(expr.CtKeySTATE, bits)...)
	}
	if r.CTStatus != "" {
		if r.CTStatus != "dnat" {
			return nil, fmt.Errorf("unknown ct status %q", r.CTStatus)
		}
		ex = append(ex, ctBitsSet(expr.CtKeySTATUS, ctStatusDNAT)...)
	}
	if r.Limit != nil {
		if r.Limit.Rate == 0 {
			return nil, errors.New("limit rate 0")
		}
		ex = append(ex, &expr.Limit{Type: expr.LimitTypePkts, Rate: r.Limit.Rate, Unit: expr.LimitTimeSecond, Burst: r.Limit.Burst, Over: r.Limit.Over})
	}
	if r.Counter != "" {
		ex = append(ex, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: r.Counter})
	}
	if counted {
		ex = append(ex, &expr.Counter{})
	}
	switch r.Verdict {
	case "accept":
		ex = append(ex, &expr.Verdict{Kind: expr.VerdictAccept})
	case "drop":
		ex = append(ex, &expr.Verdict{Kind: expr.VerdictDrop})
	case "masquerade":
		ex = append(ex, &expr.Masq{})
	case VerdictPolicyFail:
		if !r.IPv6 || r.IPv4 {
			return nil, errors.New("reject with icmpv6: want the IPv6 match alone")
		}
		ex = append(ex, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpv6PolicyFail})
	case "dnat":
		if !r.IPv4 || !r.DNAT.Addr().Is4() || r.DNAT.Port() == 0 {
			return nil, fmt.Errorf("dnat to %v: want an IPv4 address and port, and the IPv4 match", r.DNAT)
		}
		a := r.DNAT.Addr().As4()
		ex = append(ex,
			&expr.Immediate{Register: reg1, Data: a[:]},
			&expr.Immediate{Register: reg2, Data: binaryutil.BigEndian.PutUint16(r.DNAT.Port())},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1, RegProtoMin: reg2, Specified: true},
		)
	default:
		return nil, fmt.Errorf("unknown verdict %q", r.Verdict)
	}
	return ex, nil
}

// icmpv6PolicyFail is ICMPv6 destination unreachable's code 5.
const icmpv6PolicyFail = 5

// ctBitsSet matches when any of bits is set in the connection's state or
// status word, which the kernel keeps in host byte order.
func ctBitsSet(key expr.CtKey, bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: reg1, Key: key},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: make([]byte, 4)},
	}
}

// ifname is an interface name as the meta expression loads it: the name
// NUL-padded to IFNAMSIZ (16) bytes, compared whole so "eth0" does not
// match "eth01".
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}
