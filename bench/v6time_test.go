package main

import (
	"math"
	"strings"
	"testing"
)

func TestV6TimeSummary(t *testing.T) {
	// Three runs as the router's test binary prints them (-count 3),
	// metrics in go test's order, among its other lines.
	out := `goos: linux
goarch: amd64
pkg: github.com/ocfw/ocfw/router
BenchmarkFirstGlobalPacket-2   	       1	11102524272 ns/op	        26.93 v4-lease-ms	        40.00 v4-ms	        16.45 v4-wan-ms	      3000 v6-addr-ms	      3000 v6-ms	      1755 v6-pd-ms	      1800 v6-ra-ms	      1700 v6-wanll-ms	      1652 v6-wanroute-ms
BenchmarkFirstGlobalPacket-2   	       1	10046885686 ns/op	        31.11 v4-lease-ms	        50.00 v4-ms	        20.67 v4-wan-ms	      2731 v6-addr-ms	      2000 v6-ms	      1047 v6-pd-ms	      1659 v6-ra-ms	      1000 v6-wanll-ms	      1033 v6-wanroute-ms
BenchmarkOther-2   	       1	100 ns/op
BenchmarkFirstGlobalPacket-2   	       1	10624308422 ns/op	        34.99 v4-lease-ms	        10.00 v4-ms	        24.54 v4-wan-ms	      3276 v6-addr-ms	      3500 v6-ms	      1956 v6-pd-ms	      1956 v6-ra-ms	      1900 v6-wanll-ms	      1935 v6-wanroute-ms
PASS
`
	res, err := v6timeSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(res.Runs))
	}
	// Ratios 3000/40, 2000/50, 3500/10: 75, 40, 350; the median 75.
	want := []float64{75, 40, 350}
	for i, w := range want {
		if math.Abs(res.Ratios[i]-w) > 1e-9 {
			t.Errorf("ratio %d: %v, want %v", i, res.Ratios[i], w)
		}
	}
	if res.Ratio != 75 {
		t.Errorf("median ratio %v, want 75", res.Ratio)
	}
	// DAD: the WAN link-local's and the host's (addr - ra).
	if res.DAD[0] != 1700+1200 || res.Rest[0] != 3000-2900 {
		t.Errorf("run 1: DAD %v rest %v, want 2900 and 100", res.DAD[0], res.Rest[0])
	}
	var b strings.Builder
	v6timeTable(&b, res)
	for _, s := range []string{"| v6 / v4 | **75.0x** | 75.0x, 40.0x, 350.0x |", "v6: the host's address out of DAD | 3000 | 3000, 2731, 3276 |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}

	// A run without one of the moments is an error, not a zero.
	short := strings.Replace(out, "1700 v6-wanll-ms", "", 1)
	if _, err := v6timeSummary(short); err == nil {
		t.Error("a run without v6-wanll-ms was summed up")
	}
	if _, err := v6timeSummary("PASS\n"); err == nil {
		t.Error("output without results was summed up")
	}
	if m := medianF([]float64{3, 1, 2, 10}); m != 3 {
		t.Errorf("median of four %v, want the upper middle 3", m)
	}
}
