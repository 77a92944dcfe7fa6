package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/refspeed"
)

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkSoft/aes-128-cbc/16-2      	  719444	       500.0 ns/op	  32.00 MB/s	       0 B/op	       0 allocs/op
        BenchmarkGoSoft/hmac-sha1/8192      	    1149	    210135 ns/op	  38.98 MB/s	       0 B/op	       0 allocs/op
BenchmarkDispatchOverhead/null/16-2 	   10000	     9000 ns/op	  1.5 MB/s	 7.6 direct-ns/req	 9.7 dispatch-ns/req	 27.6 overhead-%	 2 B/op	 1 allocs/op
BenchmarkAFALG/des-ede3-cbc/one/64
BenchmarkBroken-2   12   notanumber ns/op
PASS`
	got := parseGoBench(out)
	want := []struct {
		name   string
		unit   string
		metric float64
	}{
		{"BenchmarkSoft/aes-128-cbc/16", "MB/s", 32},
		{"BenchmarkGoSoft/hmac-sha1/8192", "MB/s", 38.98},
		{"BenchmarkDispatchOverhead/null/16", "dispatch-ns/req", 9.7},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d results, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Metrics[w.unit] != w.metric {
			t.Errorf("result %d = %s %v, want %s %s=%v", i, got[i].Name, got[i].Metrics, w.name, w.unit, w.metric)
		}
	}
}

func TestGeodeCapCheck(t *testing.T) {
	tests := []struct {
		out  string
		want string // "" = a Geode code path
	}{
		// qemu-i386 -cpu pentium2: MMX, FXSR, no SSE.
		{"CPUINFO: OPENSSL_ia32cap=0x800000004183fffd:0x0", ""},
		// This host without a mask: SSE, SSE2, SSSE3 and AES-NI.
		{"CPUINFO: OPENSSL_ia32cap=0xfed83203178bffff:0x18005f42f1bb03a9", "SSE, SSE2, SSSE3, AES-NI"},
		// With the environment mask applied.
		{"CPUINFO: OPENSSL_ia32cap=0x108bffff:0x0 env:~0xffffffff07000000:0", ""},
	}
	for _, tc := range tests {
		c, err := parseIA32Cap(tc.out)
		if err != nil {
			t.Fatal(err)
		}
		err = geodeCapCheck(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want a Geode path", tc.out, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one naming %s", tc.out, err, tc.want)
		}
	}
	if _, err := parseIA32Cap("OpenSSL 3.0.22"); err == nil {
		t.Error("parseIA32Cap accepted output without a capability vector")
	}
}

func TestParseDispatch(t *testing.T) {
	out := `BenchmarkDispatchOverhead/aes-128-cbc/16-2   100  1 ns/op  21.0 direct-ns/req  23.6 dispatch-ns/req  12 overhead-%  0 B/op  0 allocs/op
BenchmarkDispatchOverhead/aes-128-cbc/16-2   100  1 ns/op  20.0 direct-ns/req  24.0 dispatch-ns/req  20 overhead-%  0 B/op  0 allocs/op
BenchmarkDispatchOverhead/null/16-2   100  1 ns/op  8 direct-ns/req  8.8 dispatch-ns/req  10 overhead-%  0 B/op  512 allocs/op
`
	cells, err := parseDispatch(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2 {
		t.Fatalf("%d cells, want 2: %+v", len(cells), cells)
	}
	a := cells[0]
	// Fastest of each side across runs: 20.0 direct, 23.6 dispatcher.
	if a.Cipher != "aes-128-cbc" || a.Size != 16 || a.DirectNs != 20 || a.DispatchNs != 23.6 || a.OverheadPct < 17.9 || a.OverheadPct > 18.1 {
		t.Errorf("aes cell %+v, want direct 20, dispatcher 23.6, overhead 18%%", a)
	}
	if cells[1].AllocsPerReq != 1 {
		t.Errorf("null allocs/req %v, want 1 (512 per 512-request op)", cells[1].AllocsPerReq)
	}
	if _, err := parseDispatch("PASS\n"); err == nil {
		t.Error("parseDispatch accepted output without results")
	}
}

func TestParseAFALG(t *testing.T) {
	out := `    kernel_test.go:29: guest output:
        BenchmarkGoSoft/aes-128-cbc/16       	  177811	      1827 ns/op	   8.00 MB/s	       0 B/op	       0 allocs/op
        BenchmarkAFALG/aes-128-cbc/one/16    	    4300	     93810 ns/op	   0.20 MB/s	       0 B/op	       0 allocs/op
        BenchmarkAFALG/aes-128-cbc/batch/16  	    4300	     93810 ns/op	   0.40 MB/s	       0 B/op	       0 allocs/op
        BenchmarkAFALGAsync/one/16           	    4300	     93810 ns/op	   0.10 MB/s	       0 B/op	       0 allocs/op
        BenchmarkAFALGAsync/batch/16         	    4300	     93810 ns/op	   0.30 MB/s	       0 B/op	       0 allocs/op
        BenchmarkGoSoft/null/16              	    4300	     93810 ns/op	   9.00 MB/s	       0 B/op	       0 allocs/op
`
	rows, err := parseAFALG(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (Go-only rows dropped): %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Cipher != "aes-128-cbc" || r.OneGo != 0.025 || r.BatchGo != 0.05 || r.BatchOne != 2 {
		t.Errorf("row %+v, want one/Go 0.025, batch/Go 0.05, batch/one 2", r)
	}
	if c := rows[1]; c.Cipher != "aes-128-cbc (cryptd)" || c.BatchOne < 2.99 || c.BatchOne > 3.01 {
		t.Errorf("cryptd row %+v, want batch/one 3", c)
	}
}

func TestSymbolPackage(t *testing.T) {
	for _, tc := range [][2]string{
		{"github.com/u-root/u-root/pkg/ls.(*Printer).Print", "github.com/u-root/u-root/pkg/ls"},
		{"runtime.main", "runtime"},
		{"go:string.*", "(go:string)"},
		{"type:*os.File", "(type:*os)"},
		{"crypto/internal/fips140/aes.Block.Encrypt", "crypto/internal/fips140/aes"},
	} {
		if got := symbolPackage(tc[0]); got != tc[1] {
			t.Errorf("symbolPackage(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
}

func TestSymbolsByPackageErrors(t *testing.T) {
	notELF := t.TempDir() + "/x"
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := symbolsByPackage(notELF, 5); err == nil {
		t.Error("symbolsByPackage accepted a file that is not ELF")
	}
}

func TestESPCompare(t *testing.T) {
	row := func(id, drv string, hw bool, size int, mbps float64) string {
		return fmt.Sprintf(`{"engine":%q,"driver":%q,"hardware":%v,"size":%d,"mbytes_per_sec":%g,"cpu":0.5,"received":10}`, id, drv, hw, size, mbps)
	}
	run := func(soft, virtio, testaes [2]float64) string {
		rows := []string{
			row("software", "cbc(aes-fixed-time)", false, 64, soft[0]), row("software", "cbc(aes-fixed-time)", false, 1400, soft[1]),
			row("virtio-crypto", "virtio_crypto_aes_cbc", true, 64, virtio[0]), row("virtio-crypto", "virtio_crypto_aes_cbc", true, 1400, virtio[1]),
			row("testaes", "ocfw_testaes_cbc", true, 64, testaes[0]), row("testaes", "ocfw_testaes_cbc", true, 1400, testaes[1]),
		}
		return `    kernel_test.go:240: ESPBENCH {"cipher":"aes-128-cbc","auth":"hmac-sha1","kernel_name":"cbc(aes)","default_driver":"ocfw_testaes_cbc","rows":[` + strings.Join(rows, ",") + `]}`
	}
	out := "=== RUN TestGuestBench\n" +
		run([2]float64{0.09, 0.9}, [2]float64{0.08, 1.2}, [2]float64{0.02, 0.3}) + "\n" +
		// a slower second trial, except virtio at 1400 and software at 64
		run([2]float64{0.10, 0.5}, [2]float64{0.05, 1.3}, [2]float64{0.01, 0.2}) + "\n--- PASS"
	runs, err := parseESP(out)
	if err != nil || len(runs) != 2 {
		t.Fatalf("parseESP: %d runs, %v", len(runs), err)
	}
	res, err := espCompare(runs, 1400)
	if err != nil {
		t.Fatal(err)
	}
	if res.DefaultID != "testaes" || res.ChoiceID != "virtio-crypto" || res.Trials != 2 || len(res.Rows) != 2 {
		t.Fatalf("%+v", res)
	}
	for i, w := range []espRow{{Size: 64, Default: 0.02, Choice: 0.08, Ratio: 4}, {Size: 1400, Default: 0.3, Choice: 1.3, Ratio: 1.3 / 0.3}} {
		g := res.Rows[i]
		if g.Size != w.Size || g.Default != w.Default || g.Choice != w.Choice || math.Abs(g.Ratio-w.Ratio) > 1e-9 {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	if sw, _ := res.Measurement.Row("software", 64); sw.MBps != 0.10 {
		t.Errorf("best software at 64 bytes: %v, want 0.10", sw.MBps)
	}
	res, err = espCompare(runs[:1], 1400)
	if err != nil || res.ChoiceID != "virtio-crypto" {
		t.Errorf("one trial: %+v, %v", res, err)
	}
	// Software is the choice when no engine beats it by the margin at 1400.
	slow, _ := parseESP(run([2]float64{0.09, 1.2}, [2]float64{0.08, 1.3}, [2]float64{0.02, 0.3}))
	if res, err := espCompare(slow, 1400); err != nil || res.ChoiceID != "software" || res.Rows[1].Ratio != 4 {
		t.Errorf("virtio within the margin: %+v, %v", res, err)
	}
	if _, err := parseESP("no results\n"); err == nil {
		t.Error("parseESP accepted output without results")
	}
}

func TestParseIKEPairs(t *testing.T) {
	line := func(ike, manual string) string {
		return `ocfw-ike-bench: {"Suite":"s","ESP":"e","OCFWSetup":[1,2,3],"CharonSetup":[2,2,4],"SwanctlStart":[0.5,0.5,0.5],` +
			`"IKEMBps":[` + ike + `],"ManualMBps":[1,1,1,1],"ManualNoESNMBps":[` + manual + `],"StreamSeconds":2}`
	}
	// One pair spoilt by a stall (0.1 MB/s): the best-of ratio and the
	// ratio of means move, the median of the pairs does not.
	res, err := parseIKE("=== RUN\n" + line("1,2,0.5,1", "1,1.6,0.1,1.25") + "\n--- PASS")
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1.25, 5, 0.8}
	if len(res.PairRatios) != len(want) {
		t.Fatalf("pair ratios %v, want %v", res.PairRatios, want)
	}
	for i, w := range want {
		if math.Abs(res.PairRatios[i]-w) > 1e-9 {
			t.Errorf("pair %d: %v, want %v", i, res.PairRatios[i], w)
		}
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"median", res.PairMedian, 1.125}, {"q1", res.PairQ1, 0.95}, {"q3", res.PairQ3, 2.1875}, {"min", res.PairMin, 0.8}, {"max", res.PairMax, 5},
		{"best-of ratio", res.ESPRatio, 2 / 1.6}, {"setup ratio", res.SetupRatio, 1}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if _, err := parseIKE(line("1", "0")); err == nil {
		t.Error("a result without a pair with a manual figure was accepted")
	}
}

// The devcrypto section's ratios, goal sizes and tables.
func TestDevCryptoTable(t *testing.T) {
	res := &refspeed.Result{Kernel: "6.1.0-57-686", OpenSSL: "OpenSSL 3.0.22", Rounds: 1, Seconds: 1, Rows: []refspeed.Row{
		{Path: refspeed.PathAFALG, Cipher: "aes-128-cbc", Engine: "ocfw_testaes_cbc", Reference: "openssl speed -evp aes-128-cbc -engine afalg",
			Ref: map[int]float64{16: 0.1, 8192: 2, 16384: 4}, OCF: map[int]float64{16: 0.2, 8192: 1.6, 16384: 1}},
		{Path: refspeed.PathDevCrypto, Cipher: "aes-128-cbc", Engine: "ocfw_testaes_cbc", Reference: "cryptodev-linux tests/speed",
			Ref: map[int]float64{512: 1, 65536: 8}, OCF: map[int]float64{512: 0.95, 65536: 1}},
		{Path: refspeed.PathAFALG, Cipher: "des-ede3-cbc", Engine: "cbc(des3_ede-generic)", Note: "not the same work",
			Ref: map[int]float64{16: 1}, OCF: map[int]float64{16: 0.1}},
	}}
	// 16384 and 65536 bytes are outside the goal's 16-8192.
	for i, want := range []struct {
		ratio float64
		size  int
	}{{0.8, 8192}, {0.95, 512}} {
		r, s := worstRatio(res.Rows[i])
		if math.Abs(r-want.ratio) > 1e-9 || s != want.size {
			t.Errorf("row %d: worst %v at %d, want %v at %d", i, r, s, want.ratio, want.size)
		}
	}
	var b strings.Builder
	devCryptoTable(&b, res)
	for _, want := range []string{"| aes-128-cbc | ocfw_testaes_cbc | 2.00 (0.2/0.1) | 0.80 (1.6/2) | 0.25 (1/4) |",
		"| aes-128-cbc | ocfw_testaes_cbc | 0.95 (0.95/1) | 0.12 (1/8) |", "des-ede3-cbc on cbc(des3_ede-generic): not the same work."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
