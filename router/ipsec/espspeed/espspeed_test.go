package espspeed

import (
	"os"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/ocf/afalg"
	"github.com/ocfw/ocfw/ocf/kcrypto"
)

// TestMain hands over to the kernel-in-the-loop harness (kernel_test.go).
func TestMain(m *testing.M) { os.Exit(kerneltest.Main(m)) }

func TestParseCPU(t *testing.T) {
	for _, c := range []struct {
		name, stat  string
		busy, total uint64
		err         bool
	}{
		{"6.1 line", "cpu  10 1 20 300 5 2 3 0 7 0\ncpu0 10 1 20 300 5 2 3 0 7 0\n", 10 + 1 + 20 + 2 + 3, 10 + 1 + 20 + 300 + 5 + 2 + 3, false},
		{"old kernel, four fields", "cpu 1 2 3 4\n", 6, 10, false},
		{"no cpu line", "intr 5\n", 0, 0, true},
		{"garbage", "cpu a b c d\n", 0, 0, true},
	} {
		got, err := parseCPU(c.stat)
		if (err != nil) != c.err || got.busy != c.busy || got.total != c.total {
			t.Errorf("%s: %+v, %v; want busy %d total %d, error %v", c.name, got, err, c.busy, c.total, c.err)
		}
	}
	a, b := cpuTimes{busy: 100, total: 400}, cpuTimes{busy: 175, total: 500}
	if got := b.busySince(a); got != 0.75 {
		t.Errorf("busySince = %v, want 0.75", got)
	}
	if got := a.busySince(a); got != 0 {
		t.Errorf("no ticks: %v, want 0", got)
	}
}

// fixture is /proc/crypto of the test kernel with both stand-ins.
func fixture() []kcrypto.Alg {
	sk := func(drv, mod string, prio int) kcrypto.Alg {
		return kcrypto.Alg{Name: "cbc(aes)", Driver: drv, Module: mod, Priority: prio, Type: "skcipher", SelfTest: "passed"}
	}
	ci := func(drv, mod string, prio int) kcrypto.Alg {
		return kcrypto.Alg{Name: "aes", Driver: drv, Module: mod, Priority: prio, Type: "cipher", SelfTest: "passed"}
	}
	return []kcrypto.Alg{
		sk("ocfw_testaes_cbc", "ocfw_testaes", 300),
		sk("virtio_crypto_aes_cbc", "virtio_crypto", 150),
		ci("geode-aes", "geode_aes", 300), // a catalog hardware engine's module
		ci("aes-fixed-time", "aes_ti", 101),
		ci("aes-generic", "kernel", 100),
		{Name: "__cbc(aes)", Driver: "__cbc-aes-x", Module: "kernel", Priority: 900, Type: "skcipher", Internal: true, SelfTest: "passed"},
	}
}

var standIns = []Engine{
	{ID: "virtio-crypto", Driver: "virtio_crypto_aes_cbc", Hardware: true},
	{ID: "test-aes", Driver: "ocfw_testaes_cbc", Hardware: true},
}

func TestWithSoftware(t *testing.T) {
	algs := fixture()
	built := append(fixture(), kcrypto.Alg{Name: "cbc(aes)", Driver: "cbc(aes-generic)", Module: "kernel", Priority: 100, Type: "skcipher", SelfTest: "passed"})
	noTI := []kcrypto.Alg{algs[0], algs[1], algs[4]}
	for _, c := range []struct {
		name    string
		engines []Engine
		algs    []kcrypto.Alg
		want    []string // drivers in order
		err     string
	}{
		{"software first, the best buildable instance", standIns, algs, []string{"cbc(aes-fixed-time)", "virtio_crypto_aes_cbc", "ocfw_testaes_cbc"}, ""},
		{"a registered instance below the buildable one", standIns, built, []string{"cbc(aes-fixed-time)", "virtio_crypto_aes_cbc", "ocfw_testaes_cbc"}, ""},
		{"without aes_ti", standIns[:1], noTI, []string{"cbc(aes-generic)", "virtio_crypto_aes_cbc"}, ""},
		{"software pinned by the caller", append([]Engine{{ID: "soft", Driver: "cbc(aes-generic)"}}, standIns...), algs, []string{"cbc(aes-generic)", "virtio_crypto_aes_cbc", "ocfw_testaes_cbc"}, ""},
		{"no engines: software alone", nil, algs, []string{"cbc(aes-fixed-time)"}, ""},
		{"hardware without a driver", []Engine{{ID: "x", Hardware: true}}, algs, nil, "engine x: no driver name"},
		{"no software at all", standIns, algs[:3], nil, "no software implementation of cbc(aes)"},
	} {
		got, err := withSoftware(c.engines, "cbc(aes)", "skcipher", c.algs)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var drv []string
		for _, e := range got {
			drv = append(drv, e.Driver)
		}
		if strings.Join(drv, " ") != strings.Join(c.want, " ") || got[0].Hardware {
			t.Errorf("%s: %v, want %v with software first", c.name, got, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	for in, want := range map[string][2]string{
		"cbc(aes)":                     {"cbc", "aes"},
		"cbc(des3_ede)":                {"cbc", "des3_ede"},
		"aes":                          {"", ""},
		"authenc(hmac(sha1),cbc(aes))": {"", ""},
		"(aes)":                        {"", ""},
	} {
		if a, b := split(in); a != want[0] || b != want[1] {
			t.Errorf("split(%q) = %q, %q; want %q", in, a, b, want)
		}
	}
}

// proc builds /proc/crypto entries: aead name, driver, refcount.
func proc(entries ...any) []afalg.Entry {
	var out []afalg.Entry
	for i := 0; i < len(entries); i += 3 {
		out = append(out, afalg.Entry{Name: entries[i].(string), Driver: entries[i+1].(string), Refcnt: entries[i+2].(int), Type: "aead"})
	}
	return out
}

func TestHeldAEAD(t *testing.T) {
	const esn = "authencesn(hmac(sha1),cbc(aes))"
	const gen = "echainiv(authencesn(hmac(sha1),cbc(aes)))"
	testaes := "authencesn(hmac(sha1-generic),ocfw_testaes_cbc)"
	soft := "authencesn(hmac(sha1-generic),cbc(aes-fixed-time))"
	for _, c := range []struct {
		name      string
		pre, post []afalg.Entry
		driver    string
		want, err string
	}{
		{"built by the SAs", nil, proc(gen, "echainiv("+testaes+")", 5, esn, testaes, 5), "ocfw_testaes_cbc", testaes, ""},
		{"already there, four more", proc(esn, soft, 2), proc(esn, soft, 6), "cbc(aes-fixed-time)", soft, ""},
		{"an old instance not held", proc(esn, soft, 2), proc(esn, soft, 2, esn, testaes, 5), "ocfw_testaes_cbc", testaes, ""},
		{"built on another driver", nil, proc(esn, soft, 5), "ocfw_testaes_cbc", soft, "the SAs hold " + soft + ", not a transform built on ocfw_testaes_cbc"},
		{"nothing gained", proc(esn, soft, 5), proc(esn, soft, 5), "cbc(aes-fixed-time)", "", "no cbc(aes) AEAD in /proc/crypto gained the 4 references"},
		{"another cipher's AEAD", nil, proc("authencesn(hmac(sha1),cbc(des3_ede))", "authencesn(hmac(sha1-generic),cbc(des3_ede-generic))", 5), "cbc(aes-fixed-time)", "", "no cbc(aes) AEAD"},
		{"two held", nil, proc(esn, soft, 5, esn, testaes, 5), "ocfw_testaes_cbc", "", "ambiguous"},
	} {
		got, err := heldAEAD(c.pre, c.post, "cbc(aes)", c.driver, 4)
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %q, %v; want %q, error %q", c.name, got, err, c.want, c.err)
		}
	}
}
