package kcrypto

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/afalg"
)

// fixture is /proc/crypto of a Geode board with a Hifn card and
// virtio-crypto, newest registration first, as the kernel lists it.
func fixture() []Alg {
	sk := func(name, drv, mod string, prio int) Alg {
		return Alg{Name: name, Driver: drv, Module: mod, Priority: prio, Type: "skcipher", SelfTest: "passed"}
	}
	ci := func(name, drv, mod string, prio int) Alg {
		return Alg{Name: name, Driver: drv, Module: mod, Priority: prio, Type: "cipher", SelfTest: "passed"}
	}
	return []Alg{
		sk("cbc(aes)", "cbc-aes-hifn0", "hifn_795x", 300),
		sk("cbc(des3_ede)", "cbc-3des-hifn0", "hifn_795x", 300),
		sk("cbc(aes)", "virtio_crypto_aes_cbc", "virtio_crypto", 150),
		{Name: "authenc(hmac(sha1),cbc(aes))", Driver: "authenc(hmac(sha1-generic),cbc-aes-geode)", Module: "authenc", Priority: 4100, Type: "aead", SelfTest: "passed"},
		sk("cbc(aes)", "cbc-aes-geode", "geode_aes", 400),
		sk("ecb(aes)", "ecb-aes-geode", "geode_aes", 400),
		ci("aes", "geode-aes", "geode_aes", 300),
		sk("cbc(aes)", "cbc(aes-fixed-time)", "kernel", 101),
		ci("aes", "aes-fixed-time", "aes_ti", 101),
		ci("aes", "aes-generic", "kernel", 100),
		sk("cbc(des3_ede)", "cbc(des3_ede-generic)", "kernel", 100),
		ci("des3_ede", "des3_ede-generic", "des_generic", 100),
		{Name: "__cbc(aes)", Driver: "__cbc-aes-geode", Module: "geode_aes", Priority: 400, Type: "skcipher", Internal: true, SelfTest: "passed"},
	}
}

var engines = []HWEngine{
	{ID: "geode-aes", Module: "geode_aes", Drivers: map[string]string{"aes-128-cbc": "cbc-aes-geode", "aes-192-cbc": "cbc-aes-geode", "aes-256-cbc": "cbc-aes-geode"}},
	{ID: "hifn-795x", Module: "hifn_795x", Drivers: map[string]string{"des-ede3-cbc": "cbc-3des-hifn0", "aes-128-cbc": "cbc-aes-hifn0", "aes-256-cbc": "cbc-aes-hifn0"}},
	{ID: "virtio-crypto", Module: "virtio_crypto", Drivers: map[string]string{"aes-128-cbc": "virtio_crypto_aes_cbc", "aes-256-cbc": "virtio_crypto_aes_cbc"}},
}

// apply is what the kernel does with changes, as far as priorities go.
func apply(algs []Alg, cs []Change) []Alg {
	out := append([]Alg(nil), algs...)
	for _, c := range cs {
		for i := range out {
			if out[i].Driver == c.Driver && !c.Flush {
				out[i].Priority = c.To
			}
		}
	}
	return out
}

func byDriver(cs []Change) map[string]Change {
	m := map[string]Change{}
	for _, c := range cs {
		m[c.Driver] = c
	}
	return m
}

func TestDemotions(t *testing.T) {
	algs := fixture()
	tests := []struct {
		name    string
		engines []HWEngine
		algs    []Alg
		want    map[string]int // driver -> new priority
	}{
		{"every hardware registration below software", engines, algs, map[string]int{
			"cbc-aes-hifn0": 1, "cbc-3des-hifn0": 1, "virtio_crypto_aes_cbc": 1,
			"cbc-aes-geode": 1, "ecb-aes-geode": 1, "geode-aes": 1,
		}},
		{"again: nothing left to do", engines, apply(algs, Demotions(engines, algs)), map[string]int{}},
		{"one engine", engines[2:], algs, map[string]int{"virtio_crypto_aes_cbc": 1}},
		{"engine absent from the kernel", []HWEngine{{ID: "ixp4xx", Module: "ixp4xx_crypto", Drivers: map[string]string{"aes-128-cbc": "cbc(aes)-ixp4xx"}}}, algs, map[string]int{}},
		{"software registered at 1: hardware goes to 0", engines[:1], []Alg{
			{Name: "cbc(aes)", Driver: "cbc-aes-geode", Module: "geode_aes", Priority: 400},
			{Name: "cbc(aes)", Driver: "cbc(aes-slow)", Module: "kernel", Priority: 1},
		}, map[string]int{"cbc-aes-geode": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := byDriver(Demotions(tc.engines, tc.algs))
			if len(got) != len(tc.want) {
				t.Errorf("%d changes, want %d: %v", len(got), len(tc.want), got)
			}
			for drv, to := range tc.want {
				c, ok := got[drv]
				if !ok {
					t.Errorf("%s not demoted", drv)
					continue
				}
				if c.To != to || c.Flush || c.Reason == "" {
					t.Errorf("%s: %+v, want priority %d with a reason", drv, c, to)
				}
				if a, _ := Find(tc.algs, drv); c.From != a.Priority || c.Name != a.Name {
					t.Errorf("%s: from %d (%s), the kernel has %d (%s)", drv, c.From, c.Name, a.Priority, a.Name)
				}
			}
			if c, ok := got["cbc-aes-geode"]; ok && !strings.Contains(c.Reason, "aes-fixed-time") && len(tc.algs) > 2 {
				t.Errorf("reason should name the software that serves instead: %s", c.Reason)
			}
		})
	}
}

func row(engine, cipher string, hw bool, kbps ...float64) ocf.Measurement {
	return ocf.Measurement{Engine: engine, Cipher: cipher, Hardware: hw, Sizes: []int{16, 64, 256, 1024, 8192, 16384}, KBps: kbps}
}

func TestPromotions(t *testing.T) {
	booted := apply(fixture(), Demotions(engines, fixture()))
	speeds := []ocf.Measurement{
		row("go", "aes-128-cbc", false, 1000, 1500, 1800, 1900, 2000, 2000),
		row("cbc(aes-fixed-time)", "aes-128-cbc", false, 300, 800, 1200, 1400, 1500, 1500),
		row("cbc-aes-geode", "aes-128-cbc", true, 200, 900, 4000, 9000, 12000, 12000),
		row("cbc-aes-hifn0", "aes-128-cbc", true, 50, 200, 800, 3000, 9000, 10000),
		row("virtio_crypto_aes_cbc", "aes-128-cbc", true, 10, 40, 160, 1500, 5000, 6000),
		row("go", "aes-256-cbc", false, 800, 1100, 1300, 1400, 1500, 1500),
		row("cbc-aes-geode", "aes-256-cbc", true, 100, 300, 700, 900, 1000, 1000),
	}
	geodePolicy := ocf.Policy{
		Trusted: []string{"cbc-aes-geode", "cbc-aes-hifn0", "virtio_crypto_aes_cbc", "cbc-3des-hifn0"},
		Ciphers: map[string]ocf.CipherPolicy{
			"aes-128-cbc":  {Driver: "cbc-aes-geode", MinHardware: 256},
			"aes-256-cbc":  {SoftwareOnly: true},
			"des-ede3-cbc": {SoftwareOnly: true},
		},
	}
	failedVirtio := geodePolicy.Clone()
	failedVirtio.Failed = map[string]string{"virtio_crypto_aes_cbc": "aes-128-cbc: wrong output at 4096 bytes"}
	failedVirtio.Trusted = []string{"cbc-aes-geode", "cbc-aes-hifn0"}
	late := geodePolicy.Clone()
	late.Ciphers["aes-128-cbc"] = ocf.CipherPolicy{Driver: "cbc-aes-geode", MinHardware: 8192}
	denied := geodePolicy.Clone()
	denied.Deny = []string{"cbc-aes-geode"}

	type want struct {
		to      map[string]int // drivers whose priority changes
		flushed []string
		choice  string // Want of the first cipher
		why     string // in the first cipher's Why
		// kept: drivers left below software with no change, and a word
		// of why
		kept map[string]string
	}
	tests := []struct {
		name    string
		algs    []Alg
		policy  ocf.Policy
		ciphers []string
		size    int
		want    want
	}{
		{"policy's engine first, a faster one second, a slower one kept down", booted, geodePolicy, []string{"aes-128-cbc"}, 0, want{
			to:      map[string]int{"cbc-aes-geode": 301, "cbc-aes-hifn0": 201},
			flushed: []string{"virtio_crypto_aes_cbc", "cbc(aes-fixed-time)"},
			choice:  "cbc-aes-geode", why: "from 256-byte requests",
			kept: map[string]string{"virtio_crypto_aes_cbc": "not 15% faster than software for aes-128-cbc at 1024 bytes"},
		}},
		{"failed engine stays below software", booted, failedVirtio, []string{"aes-128-cbc"}, 0, want{
			to:      map[string]int{"cbc-aes-geode": 301, "cbc-aes-hifn0": 201},
			flushed: []string{"virtio_crypto_aes_cbc", "cbc(aes-fixed-time)"},
			choice:  "cbc-aes-geode",
			kept:    map[string]string{"virtio_crypto_aes_cbc": "failed its self-test (aes-128-cbc: wrong output at 4096 bytes)"},
		}},
		{"ciphers sharing cbc(aes) disagree: software first", booted, geodePolicy, []string{"aes-128-cbc", "aes-256-cbc"}, 0, want{
			to: map[string]int{}, why: "do not agree",
			kept: map[string]string{"cbc-aes-geode": "does not choose hardware", "cbc-aes-hifn0": "does not choose hardware",
				"virtio_crypto_aes_cbc": "does not choose hardware"},
		}},
		{"policy uses hardware only above the packet size", booted, late, []string{"aes-128-cbc"}, 0, want{
			to: map[string]int{}, why: "only from 8192 bytes",
			kept: map[string]string{"cbc-aes-geode": "does not choose hardware", "cbc-aes-hifn0": "does not choose hardware",
				"virtio_crypto_aes_cbc": "does not choose hardware"},
		}},
		{"large packets: the late choice applies", booted, late, []string{"aes-128-cbc"}, 9000, want{
			// At 8192 bytes virtio (5000 kB/s) beats the kernel's software
			// (1500) too: third, below Hifn (9000).
			to:      map[string]int{"cbc-aes-geode": 401, "cbc-aes-hifn0": 301, "virtio_crypto_aes_cbc": 201},
			flushed: []string{"cbc(aes-fixed-time)"},
			choice:  "cbc-aes-geode",
		}},
		{"denied engine is not promoted", booted, denied, []string{"aes-128-cbc"}, 0, want{
			to: map[string]int{},
			kept: map[string]string{"cbc-aes-geode": "not permitted by the policy", "cbc-aes-hifn0": "does not choose hardware",
				"virtio_crypto_aes_cbc": "does not choose hardware"},
		}},
		{"not demoted at boot: a failed engine is demoted now", fixture(), failedVirtio, []string{"aes-128-cbc"}, 0, want{
			to: map[string]int{"cbc-aes-geode": 301, "cbc-aes-hifn0": 201, "virtio_crypto_aes_cbc": 1,
				"ecb-aes-geode": 1, "geode-aes": 1, "cbc-3des-hifn0": 1},
			flushed: []string{"virtio_crypto_aes_cbc", "cbc(aes-fixed-time)"},
			choice:  "cbc-aes-geode",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Promotions(Input{Engines: engines, Algs: tc.algs, Policy: tc.policy, Speeds: speeds, Ciphers: tc.ciphers, Size: tc.size})
			set := map[string]int{}
			var flushed []string
			for _, c := range d.Changes {
				if c.Reason == "" {
					t.Errorf("%s: no reason", c.Driver)
				}
				if c.Flush {
					flushed = append(flushed, c.Driver)
					continue
				}
				set[c.Driver] = c.To
			}
			if len(set) != len(tc.want.to) {
				t.Errorf("priorities %v, want %v\n%v", set, tc.want.to, d.Changes)
			}
			for drv, to := range tc.want.to {
				if set[drv] != to {
					t.Errorf("%s: priority %d, want %d\n%v", drv, set[drv], to, d.Changes)
				}
			}
			for _, f := range tc.want.flushed {
				if !contains(flushed, f) {
					t.Errorf("%s not flushed (flushed %v)", f, flushed)
				}
			}
			if len(tc.want.flushed) == 0 && len(flushed) > 0 {
				t.Errorf("flushed %v with nothing promoted", flushed)
			}
			for drv, why := range tc.want.kept {
				k, ok := byDriver(d.Kept)[drv]
				if !ok || k.To != k.From || k.To > Demoted || !strings.Contains(k.Reason, why) {
					t.Errorf("%s not recorded as kept below software with %q: %+v", drv, why, d.Kept)
				}
			}
			if len(d.Kept) != len(tc.want.kept) {
				t.Errorf("kept %+v, want %v", d.Kept, tc.want.kept)
			}
			if len(d.Ciphers) != len(tc.ciphers) {
				t.Fatalf("%d choices for %d ciphers", len(d.Ciphers), len(tc.ciphers))
			}
			c := d.Ciphers[0]
			if c.Want != tc.want.choice || c.Kernel != "cbc(aes)" || !strings.Contains(c.Why, tc.want.why) {
				t.Errorf("choice %+v, want %q with why containing %q", c, tc.want.choice, tc.want.why)
			}
			// Whatever was decided, the kernel's choice after it is the
			// decided one: highest priority under cbc(aes).
			after := apply(tc.algs, d.Changes)
			var top Alg
			for _, a := range after {
				if a.Name == "cbc(aes)" && !a.Internal && a.Priority > top.Priority {
					top = a
				}
			}
			want := c.Want
			if want == "" {
				want = "cbc(aes-fixed-time)"
			}
			if top.Driver != want {
				t.Errorf("after the changes cbc(aes) resolves to %s (%d), want %s", top.Driver, top.Priority, want)
			}
		})
	}
}

func TestPreferAndDemoteByHand(t *testing.T) {
	algs := fixture()
	cs, err := DemoteChanges(algs, "aes-fixed-time")
	if err != nil || len(cs) != 1 || cs[0].To != 1 || cs[0].From != 101 {
		t.Fatalf("demote aes-fixed-time: %v %v", cs, err)
	}
	after := apply(algs, cs)
	cs, err = PreferChanges(after, "aes-fixed-time")
	if err != nil {
		t.Fatal(err)
	}
	m := byDriver(cs)
	if m["aes-fixed-time"].To != 301 || !m["geode-aes"].Flush || !m["aes-generic"].Flush {
		t.Errorf("prefer aes-fixed-time: %v (want 301, above geode-aes's 300, and the other aes flushed)", cs)
	}
	if cs, _ := DemoteChanges(after, "aes-fixed-time"); len(cs) != 0 {
		t.Errorf("demoting a demoted driver: %v", cs)
	}
	for _, bad := range []string{"cbc(aes)", "no-such-driver", "__cbc-aes-geode"} {
		if _, err := PreferChanges(algs, bad); err == nil {
			t.Errorf("prefer %s: want an error", bad)
		}
	}
	_, err = DemoteChanges(algs, "cbc(aes)")
	if err == nil || !strings.Contains(err.Error(), "cbc-aes-geode") || !strings.Contains(err.Error(), "generic name") {
		t.Errorf("a generic name should be refused with the driver names that serve it: %v", err)
	}
}

func TestServed(t *testing.T) {
	e := func(drv string, prio, ref int) afalg.Entry {
		return afalg.Entry{Name: "cbc(aes)", Driver: drv, Priority: prio, Refcnt: ref, Type: "skcipher", SelfTest: "passed"}
	}
	tests := []struct {
		name     string
		one, two []afalg.Entry
		driver   string
		how      string
	}{
		{"count rose on the served one", []afalg.Entry{e("cbc-aes-geode", 1, 1), e("cbc(aes-generic)", 100, 2)},
			[]afalg.Entry{e("cbc-aes-geode", 1, 1), e("cbc(aes-generic)", 100, 3)}, "cbc(aes-generic)", "refcount"},
		{"hardware with its fallback: the higher riser", []afalg.Entry{e("cbc-aes-geode", 400, 2), e("cbc(aes-generic)", 100, 2)},
			[]afalg.Entry{e("cbc-aes-geode", 400, 3), e("cbc(aes-generic)", 100, 3)}, "cbc-aes-geode", "refcount"},
		{"no count moved: priority rule", []afalg.Entry{e("a", 1, 1), e("b", 100, 2)},
			[]afalg.Entry{e("a", 1, 1), e("b", 100, 2)}, "b", "priority"},
	}
	for _, tc := range tests {
		r, err := served("cbc(aes)", "skcipher", tc.one, tc.two)
		if err != nil || r.Driver != tc.driver || r.How != tc.how {
			t.Errorf("%s: %+v %v, want %s by %s", tc.name, r, err, tc.driver, tc.how)
		}
	}
	if _, err := served("cbc(aes)", "skcipher", nil, nil); err == nil {
		t.Error("nothing listed: want an error")
	}
}

func TestWriteStatus(t *testing.T) {
	st := []NameStatus{{Name: "cbc(aes)", Type: "skcipher", Ciphers: []string{"aes-128-cbc", "aes-256-cbc"},
		Resolved: &Resolution{Name: "cbc(aes)", Driver: "cbc(aes-fixed-time)", Priority: 101, How: "refcount"}},
		{Name: "hmac(md5)", Type: "hash", Ciphers: []string{"hmac-md5"}, Error: "afalg: bind hash hmac(md5): no such algorithm"}}
	fill(st, engines, apply(fixture(), Demotions(engines, fixture())))
	var b bytes.Buffer
	if err := WriteStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Compare lines with their spacing collapsed: the column widths are
	// tabwriter's business.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	for _, w := range []string{
		"cbc(aes) (aes-128-cbc, aes-256-cbc) kernel resolves: cbc(aes-fixed-time)",
		"* 101 cbc(aes-fixed-time) kernel software",
		"1 cbc-aes-geode geode_aes hardware (geode-aes)",
		"new cbc(aes) instances are built on the best aes:",
		"100 aes-generic kernel software",
		"1 geode-aes geode_aes hardware (geode-aes)",
		"hmac(md5) (hmac-md5) kernel resolves: ? (afalg: bind hash hmac(md5): no such algorithm)",
		"nothing registered yet: the first user's bind builds it from a template",
	} {
		if !contains(lines, w) {
			t.Errorf("lacks the line %q:\n%s", w, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("trailing spaces: %q", l)
		}
	}
	if strings.Contains(out, "__cbc-aes-geode") || strings.Contains(out, "authenc") {
		t.Errorf("internal and other names listed:\n%s", out)
	}
	if st[0].Candidates[0].Driver != "cbc(aes-fixed-time)" || st[0].Candidates[len(st[0].Candidates)-1].Priority != 1 {
		t.Errorf("candidates not best first: %+v", st[0].Candidates)
	}
}
