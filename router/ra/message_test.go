package ra

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// options splits an advertisement's options by type.
func options(t *testing.T, m []byte) map[byte][][]byte {
	t.Helper()
	out := map[byte][][]byte{}
	for o := m[16:]; len(o) > 0; {
		if len(o) < 8 || o[1] == 0 || int(o[1])*8 > len(o) {
			t.Fatalf("bad option at %x", o)
		}
		out[o[0]] = append(out[o[0]], o[:int(o[1])*8])
		o = o[int(o[1])*8:]
	}
	return out
}

// TestRouterAdvertMarshal: each field lands where RFC 4861 and 8106 put
// it.
func TestRouterAdvertMarshal(t *testing.T) {
	a := Advert{
		Managed: true, RouterLifetime: 3 * time.Hour, MTU: 1400,
		SourceMAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56},
		Prefixes: []Prefix{
			{Prefix: netip.MustParsePrefix("2001:db8:1:10::1/64"), Valid: ValidLimit, Preferred: PreferredLimit},
			{Prefix: netip.MustParsePrefix("fd12:3456:789a::/64"), Valid: time.Hour, Preferred: 2 * time.Hour, NoSLAAC: true},
		},
		Routes: []Route{
			{Prefix: netip.MustParsePrefix("2001:db8:1:10::/60"), Lifetime: ValidLimit},
			{Prefix: netip.MustParsePrefix("fd12:3456:789a::/48"), Lifetime: 0},
			{Prefix: netip.MustParsePrefix("2001:db8:1:10:8000::/65"), Lifetime: time.Minute},
		},
		RDNSS:       []netip.Addr{netip.MustParseAddr("2001:db8:1:10::1"), netip.MustParseAddr("fd12:3456:789a::1")},
		DNSSL:       []string{"home.example", "lan."},
		DNSLifetime: 1800 * time.Second,
	}
	m, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if m[0] != 134 || m[1] != 0 || m[5] != 0x80 || m[4] != 64 {
		t.Errorf("header % x", m[:8])
	}
	if rl := binary.BigEndian.Uint16(m[6:]); rl != 9000 {
		t.Errorf("router lifetime %d, want 9000 (the cap)", rl)
	}
	o := options(t, m)
	if sl := o[optSourceLL]; len(sl) != 1 || !bytes.Equal(sl[0][2:8], a.SourceMAC) {
		t.Errorf("source link-layer option %x", sl)
	}
	if mtu := o[optMTU]; len(mtu) != 1 || binary.BigEndian.Uint32(mtu[0][4:]) != 1400 {
		t.Errorf("MTU option %x", mtu)
	}
	pi := o[optPrefix]
	if len(pi) != 2 {
		t.Fatalf("%d prefix options", len(pi))
	}
	for i, want := range []struct {
		flags       byte
		valid, pref uint32
		prefix      string
	}{{0xc0, 5400, 2700, "2001:db8:1:10::"}, {0x80, 3600, 3600, "fd12:3456:789a::"}} {
		p := pi[i]
		got, _ := netip.AddrFromSlice(p[16:32])
		if p[2] != 64 || p[3] != want.flags || binary.BigEndian.Uint32(p[4:]) != want.valid || binary.BigEndian.Uint32(p[8:]) != want.pref || got.String() != want.prefix {
			t.Errorf("prefix %d: len %d flags %#x valid %d preferred %d %s; want %+v", i, p[2], p[3], binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:]), got, want)
		}
	}
	// RFC 4191 2.3: length 2 for up to 64 bits of prefix, 3 beyond;
	// preference medium (0); the prefix's bytes only.
	ri := o[optRoute]
	if len(ri) != 3 {
		t.Fatalf("%d route information options", len(ri))
	}
	for i, want := range []struct {
		units, bits byte
		lifetime    uint32
		prefix      string
	}{{2, 60, 5400, "2001:db8:1:10::"}, {2, 48, 0, "fd12:3456:789a::"}, {3, 65, 60, "2001:db8:1:10:8000::"}} {
		p := ri[i]
		var a16 [16]byte
		copy(a16[:], p[8:])
		got := netip.AddrFrom16(a16)
		if p[1] != want.units || p[2] != want.bits || p[3] != 0 || binary.BigEndian.Uint32(p[4:]) != want.lifetime || got.String() != want.prefix {
			t.Errorf("route %d: % x, want %+v", i, p, want)
		}
	}
	r := o[optRDNSS]
	if len(r) != 1 || r[0][1] != 5 || binary.BigEndian.Uint32(r[0][4:]) != 1800 {
		t.Fatalf("RDNSS option %x", r)
	}
	if got, _ := netip.AddrFromSlice(r[0][24:40]); got.String() != "fd12:3456:789a::1" {
		t.Errorf("second resolver %s", got)
	}
	d := o[optDNSSL]
	want := "\x04home\x07example\x00\x03lan\x00"
	if len(d) != 1 || len(d[0])%8 != 0 || !strings.HasPrefix(string(d[0][8:]), want) || strings.Trim(string(d[0][8+len(want):]), "\x00") != "" {
		t.Errorf("DNSSL option %q", d)
	}
	for _, bad := range []Advert{
		{DNSSL: []string{"a..b"}},
		{RDNSS: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
		{Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}},
		{DNSSL: []string{strings.Repeat("x", 64) + ".lan"}},
	} {
		if _, err := bad.Marshal(); err == nil {
			t.Errorf("Marshal(%+v) took it", bad)
		}
	}
}

// TestRouterAdvertCheckRS: RFC 4861 section 6.1.1's checks of a
// solicitation.
func TestRouterAdvertCheckRS(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1")
	sllao := []byte{1, 1, 0x52, 0x54, 0, 1, 2, 3}
	rs := func(code byte, opts ...byte) []byte { return append([]byte{133, code, 0, 0, 0, 0, 0, 0}, opts...) }
	for _, tc := range []struct {
		name string
		m    []byte
		src  netip.Addr
		hop  int
		want string // "" for valid
	}{
		{"plain", rs(0), ll, 255, ""},
		{"with its address", rs(0, sllao...), ll, 255, ""},
		{"from :: without address", rs(0), netip.IPv6Unspecified(), 255, ""},
		{"routed", rs(0), ll, 64, "hop limit 64"},
		{"code", rs(1), ll, 255, "code 1"},
		{"short", rs(0)[:6], ll, 255, "shorter"},
		{"zero-length option", rs(0, 1, 0, 0, 0, 0, 0, 0, 0), ll, 255, "bad length"},
		{"option past the end", rs(0, 1, 2, 0, 0, 0, 0, 0, 0), ll, 255, "bad length"},
		{"from :: with address", rs(0, sllao...), netip.IPv6Unspecified(), 255, "unspecified"},
		{"an advert", append([]byte{134}, rs(0)[1:]...), ll, 255, "type 134"},
	} {
		err := checkRS(tc.m, tc.src, tc.hop)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRouterAdvertDeprecate: a prefix taken out by Update is announced
// with preferred lifetime 0 and its valid lifetime counting down, then
// dropped; one that comes back is announced normally again.
func TestRouterAdvertDeprecate(t *testing.T) {
	old := Prefix{Prefix: netip.MustParsePrefix("2001:db8:1:10::/64"), Valid: ValidLimit, Preferred: PreferredLimit}
	nw := Prefix{Prefix: netip.MustParsePrefix("2001:db8:2:20::/64"), Valid: ValidLimit, Preferred: PreferredLimit}
	s, err := New(Config{Interface: "lan"}, Advert{Prefixes: []Prefix{old}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(Advert{Prefixes: []Prefix{nw}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := s.current(now.Add(10*time.Second), nil)
	if len(a.Prefixes) != 2 || a.Prefixes[0] != nw || a.Prefixes[1].Prefix != old.Prefix || a.Prefixes[1].Preferred != 0 ||
		a.Prefixes[1].Valid > ValidLimit-10*time.Second || a.Prefixes[1].Valid < ValidLimit-12*time.Second {
		t.Errorf("after the change: %+v", a.Prefixes)
	}
	if st := s.Stats(); st.Deprecating != 1 {
		t.Errorf("Deprecating %d", st.Deprecating)
	}
	// Withdrawn: what would be deprecated after an update, without it.
	if w := s.Withdrawn(Advert{Prefixes: []Prefix{nw}}, now); !slices.Equal(w, []netip.Prefix{old.Prefix}) {
		t.Errorf("Withdrawn keeping the new one: %v", w)
	}
	if w := s.Withdrawn(Advert{Prefixes: []Prefix{old}}, now); !slices.Equal(w, []netip.Prefix{nw.Prefix}) {
		t.Errorf("Withdrawn going back: %v", w)
	}
	if w := s.Withdrawn(Advert{}, now); !slices.Equal(w, []netip.Prefix{old.Prefix, nw.Prefix}) {
		t.Errorf("Withdrawn of everything: %v", w)
	}
	if w := s.Withdrawn(Advert{Prefixes: []Prefix{nw}}, now.Add(ValidLimit+time.Second)); len(w) != 0 {
		t.Errorf("Withdrawn after the old one ran out: %v", w)
	}
	if a := s.current(now.Add(ValidLimit+time.Second), nil); len(a.Prefixes) != 1 || a.Prefixes[0] != nw {
		t.Errorf("after the old one ran out: %+v", a.Prefixes)
	}
	// Back and forth: the prefix back in use is not deprecated too.
	s.Update(Advert{Prefixes: []Prefix{old}})
	s.Update(Advert{Prefixes: []Prefix{nw}})
	s.Update(Advert{Prefixes: []Prefix{old}})
	a = s.current(time.Now(), nil)
	if len(a.Prefixes) != 2 || a.Prefixes[0] != old || a.Prefixes[1].Prefix != nw.Prefix || a.Prefixes[1].Preferred != 0 {
		t.Errorf("back and forth: %+v", a.Prefixes)
	}
	// Routes (RFC 4191): one taken out is announced with lifetime 0
	// until the lifetime it had would have run out, then dropped; one
	// put back is announced with its lifetime again.
	r1 := Route{Prefix: netip.MustParsePrefix("2001:db8:1::/60"), Lifetime: time.Hour}
	r2 := Route{Prefix: netip.MustParsePrefix("2001:db8:2::/60"), Lifetime: time.Hour}
	s.Update(Advert{Routes: []Route{r1}})
	s.Update(Advert{Routes: []Route{r2}})
	if a := s.current(time.Now(), nil); len(a.Routes) != 2 || a.Routes[0] != r2 || a.Routes[1] != (Route{Prefix: r1.Prefix}) {
		t.Errorf("route withdrawn: %+v", a.Routes)
	}
	if a := s.current(time.Now().Add(time.Hour+time.Second), nil); len(a.Routes) != 1 || a.Routes[0] != r2 {
		t.Errorf("withdrawn route after its lifetime: %+v", a.Routes)
	}
	s.Update(Advert{Routes: []Route{r2}})
	s.Update(Advert{Routes: []Route{r1, r2}})
	if a := s.current(time.Now(), nil); !slices.Equal(a.Routes, []Route{r1, r2}) {
		t.Errorf("route back: %+v", a.Routes)
	}
	if _, err := New(Config{Interface: "lan", MaxInterval: time.Second}, Advert{}); err == nil {
		t.Error("a 1 s interval taken")
	}
}

// TestRouterAdvertCountsDown: a delegated prefix's lifetimes (and its
// route's) are announced as what is left of the delegation at each
// advertisement, not as the last renumbering computed them (RFC 9096:
// never beyond the delegation's lifetimes); a prefix without ends (the
// ULA's) is announced the same each time. Withdrawn when the
// delegation has run out, a prefix is deprecated for what is left, not
// for the lifetime it was last given.
func TestRouterAdvertCountsDown(t *testing.T) {
	now := time.Now()
	ula := Prefix{Prefix: netip.MustParsePrefix("fd12:3456:789a::/64"), Valid: ValidLimit, Preferred: PreferredLimit}
	pd := Prefix{Prefix: netip.MustParsePrefix("2001:db8:1:10::/64"), Valid: 600 * time.Second, Preferred: 300 * time.Second,
		ValidEnds: now.Add(600 * time.Second), PreferredEnds: now.Add(300 * time.Second)}
	route := Route{Prefix: netip.MustParsePrefix("2001:db8:1:10::/60"), Lifetime: 600 * time.Second, Ends: now.Add(600 * time.Second)}
	s, err := New(Config{Interface: "lan"}, Advert{Prefixes: []Prefix{ula, pd}, Routes: []Route{route}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		after                   time.Duration
		valid, preferred, route time.Duration
	}{
		{0, 600 * time.Second, 300 * time.Second, 600 * time.Second},
		{100 * time.Second, 500 * time.Second, 200 * time.Second, 500 * time.Second},
		{400 * time.Second, 200 * time.Second, 0, 200 * time.Second},
		{700 * time.Second, 0, 0, 0},
	} {
		a := s.current(now.Add(tt.after), nil)
		if len(a.Prefixes) != 2 || a.Prefixes[0] != ula {
			t.Fatalf("%v later: prefixes %+v, want the ULA's unchanged first", tt.after, a.Prefixes)
		}
		if p := a.Prefixes[1]; p.Valid != tt.valid || p.Preferred != tt.preferred {
			t.Errorf("%v later: the delegated /64 valid %v preferred %v, want %v and %v", tt.after, p.Valid, p.Preferred, tt.valid, tt.preferred)
		}
		if len(a.Routes) != 1 || a.Routes[0].Lifetime != tt.route {
			t.Errorf("%v later: routes %+v, want lifetime %v", tt.after, a.Routes, tt.route)
		}
		if _, err := a.Marshal(); err != nil {
			t.Errorf("%v later: %v", tt.after, err)
		}
	}
	// The ends are absolute: the advertisement given to Update is cut
	// to what is left when it is withdrawn.
	s.Update(Advert{Prefixes: []Prefix{ula}})
	if end, want := s.WithdrawnEnd(time.Now()), now.Add(600*time.Second); end.After(want) || end.Before(want.Add(-time.Second)) {
		t.Errorf("withdrawn: deprecated until %v, want the delegation's end %v", end, want)
	}
}

// memStore is a ValueStore in memory, as JSON like the board's store.
type memStore struct {
	values map[string][]byte
	writes int
}

func (m *memStore) Value(name string, v any) (bool, error) {
	b, ok := m.values[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (m *memStore) SetValue(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if m.values == nil {
		m.values = map[string][]byte{}
	}
	m.values[name] = b
	m.writes++
	return nil
}

// TestRouterAdvertKeptPrefixes: the prefixes hosts were told of are
// kept in the store as they change; a server started on that store (the
// next boot) announces the ones it does not announce itself with both
// lifetimes 0 (RFC 9096 section 3.3), drops that once one is announced
// again, and forgets them after ValidLimit.
func TestRouterAdvertKeptPrefixes(t *testing.T) {
	old := Prefix{Prefix: netip.MustParsePrefix("2001:db8:1:10::/64"), Valid: ValidLimit, Preferred: PreferredLimit}
	ula := Prefix{Prefix: netip.MustParsePrefix("fd12:3456:789a:10::/64"), Valid: ValidLimit, Preferred: PreferredLimit}
	nw := Prefix{Prefix: netip.MustParsePrefix("2001:db8:2:20::/64"), Valid: ValidLimit, Preferred: PreferredLimit}
	kept := func(st *memStore) []string {
		var v []string
		if ok, err := st.Value(AdvertisedValue, &v); !ok || err != nil {
			t.Fatalf("nothing kept: %v", err)
		}
		return v
	}
	st := &memStore{}
	s, err := New(Config{Interface: "lan", Store: st}, Advert{Prefixes: []Prefix{ula, old}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kept(st); !slices.Equal(got, []string{"2001:db8:1:10::/64", "fd12:3456:789a:10::/64"}) {
		t.Errorf("kept at start: %v", got)
	}
	// The same prefixes again: no write.
	w := st.writes
	s.Update(Advert{Prefixes: []Prefix{old, ula}})
	if st.writes != w {
		t.Errorf("%d writes for an unchanged set", st.writes-w)
	}

	// The next boot: the delegation is not back yet, only the ULA.
	s2, err := New(Config{Interface: "lan", Store: st}, Advert{Prefixes: []Prefix{ula}})
	if err != nil {
		t.Fatal(err)
	}
	a := s2.current(time.Now(), nil)
	if len(a.Prefixes) != 2 || a.Prefixes[0] != ula || a.Prefixes[1] != (Prefix{Prefix: old.Prefix}) {
		t.Fatalf("after the reboot: %+v, want the ULA and %s with lifetimes 0", a.Prefixes, old.Prefix)
	}
	b, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pio := options(t, b)[optPrefix]
	if len(pio) != 2 || binary.BigEndian.Uint32(pio[1][4:]) != 0 || binary.BigEndian.Uint32(pio[1][8:]) != 0 {
		t.Errorf("on the wire: %x", pio)
	}
	if got := kept(st); !slices.Equal(got, []string{"2001:db8:1:10::/64", "fd12:3456:789a:10::/64"}) {
		t.Errorf("kept after the reboot: %v (the deprecated one must stay until it runs out)", got)
	}
	// Another delegation: the old one still deprecated, the new kept.
	s2.Update(Advert{Prefixes: []Prefix{ula, nw}})
	a = s2.current(time.Now(), nil)
	if len(a.Prefixes) != 3 || a.Prefixes[2] != (Prefix{Prefix: old.Prefix}) {
		t.Errorf("another delegation: %+v", a.Prefixes)
	}
	if got := kept(st); !slices.Equal(got, []string{"2001:db8:1:10::/64", "2001:db8:2:20::/64", "fd12:3456:789a:10::/64"}) {
		t.Errorf("kept: %v", got)
	}
	// After ValidLimit no host holds it: not announced, not kept.
	later := time.Now().Add(ValidLimit + time.Second)
	if a := s2.current(later, nil); len(a.Prefixes) != 2 {
		t.Errorf("after ValidLimit: %+v", a.Prefixes)
	}
	s2.keep(later)
	if got := kept(st); !slices.Equal(got, []string{"2001:db8:2:20::/64", "fd12:3456:789a:10::/64"}) {
		t.Errorf("kept after ValidLimit: %v", got)
	}

	// The same delegation back after a reboot: announced, not deprecated.
	s3, err := New(Config{Interface: "lan", Store: st}, Advert{Prefixes: []Prefix{ula}})
	if err != nil {
		t.Fatal(err)
	}
	s3.Update(Advert{Prefixes: []Prefix{ula, nw}})
	if a := s3.current(time.Now(), nil); len(a.Prefixes) != 2 || a.Prefixes[1] != nw {
		t.Errorf("the same delegation back: %+v", a.Prefixes)
	}
	if st := s3.Stats(); st.Deprecating != 0 {
		t.Errorf("Deprecating %d", st.Deprecating)
	}

	// Garbage in the store is skipped, not fatal.
	bad := &memStore{values: map[string][]byte{AdvertisedValue: []byte(`["10.0.0.0/24","nonsense","2001:db8:9::/64"]`)}}
	s4, err := New(Config{Interface: "lan", Store: bad}, Advert{})
	if err != nil {
		t.Fatal(err)
	}
	if a := s4.current(time.Now(), nil); len(a.Prefixes) != 1 || a.Prefixes[0].Prefix.String() != "2001:db8:9::/64" {
		t.Errorf("from a damaged value: %+v", a.Prefixes)
	}
}
