package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// v6timeLine is a result line as the router's test binary prints it:
// the metrics sorted by unit, as go test does.
func v6timeLine(runs map[string]map[string]float64) string {
	var units []string
	vals := map[string]float64{}
	for variant, run := range runs {
		for k, v := range run {
			u := variant + "-" + k + "-ms"
			units = append(units, u)
			vals[u] = v
		}
	}
	sort.Strings(units)
	line := "BenchmarkFirstGlobalPacket-2   \t       1\t25019172070 ns/op"
	for _, u := range units {
		line += fmt.Sprintf("\t      %.2f %s", vals[u], u)
	}
	return line + "\n"
}

func TestV6TimeSummary(t *testing.T) {
	dhclient := []map[string]float64{
		{"v4-wan": 16.45, "v4-lease": 26.93, "v4": 40, "v6-wanll": 1700, "v6-wanroute": 1652, "v6-pd": 1755, "v6-hostll": 1500, "v6-ra": 1800, "v6-addr": 3000, "v6": 3000},
		{"v4-wan": 20.67, "v4-lease": 31.11, "v4": 50, "v6-wanll": 1000, "v6-wanroute": 1033, "v6-pd": 1047, "v6-hostll": 1900, "v6-ra": 1659, "v6-addr": 2731, "v6": 2000},
		{"v4-wan": 24.54, "v4-lease": 34.99, "v4": 10, "v6-wanll": 1900, "v6-wanroute": 1935, "v6-pd": 1956, "v6-hostll": 1000, "v6-ra": 1956, "v6-addr": 3276, "v6": 3500},
	}
	dhcpcd := []map[string]float64{
		// The host's link-local address later than the router's: it
		// gates the prefix heard.
		{"v4-wan": 20, "v4-discover": 250, "v4-ack": 300, "v4-lease": 5300, "v4": 5310, "v6-wanll": 1200, "v6-wanroute": 1201, "v6-pd": 1300, "v6-hostll": 1900, "v6-ra": 1950, "v6-addr": 3000, "v6": 3010},
		// The router's later: it gates.
		{"v4-wan": 21, "v4-discover": 450, "v4-ack": 500, "v4-lease": 3990, "v4": 4000, "v6-wanll": 1500, "v6-wanroute": 1501, "v6-pd": 1600, "v6-hostll": 1100, "v6-ra": 1610, "v6-addr": 1990, "v6": 2000},
		{"v4-wan": 22, "v4-discover": 800, "v4-ack": 900, "v4-lease": 5990, "v4": 6000, "v6-wanll": 1000, "v6-wanroute": 1001, "v6-pd": 1100, "v6-hostll": 1800, "v6-ra": 1850, "v6-addr": 3550, "v6": 3600},
	}
	// Three runs (-count 3) among go test's other lines.
	out := "goos: linux\ngoarch: amd64\npkg: github.com/ocfw/ocfw/router\n"
	for i := range dhclient {
		out += v6timeLine(map[string]map[string]float64{"dhclient": dhclient[i], "dhcpcd": dhcpcd[i]})
		if i == 1 {
			out += "BenchmarkOther-2   \t       1\t100 ns/op\n"
		}
	}
	out += "PASS\n"
	res, err := v6timeSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variants) != 2 || res.Variants[0].Name != "dhclient" || res.Variants[1].Name != "dhcpcd" {
		t.Fatalf("variants %+v, want dhclient and dhcpcd", res.Variants)
	}
	a, d := res.Variants[0], res.Variants[1]
	if len(a.Runs) != 3 || len(d.Runs) != 3 {
		t.Fatalf("%d and %d runs, want 3 each", len(a.Runs), len(d.Runs))
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	// dhclient: ratios 3000/40, 2000/50, 3500/10: 75, 40, 350; the
	// median 75.
	for i, w := range []float64{75, 40, 350} {
		near(fmt.Sprintf("dhclient ratio %d", i), a.Ratios[i], w)
	}
	near("dhclient median ratio", a.Ratio, 75)
	// Its DAD: the WAN link-local's and the host's (addr - ra); the
	// host's link-local does not gate the kernel's SLAAC.
	near("dhclient run 1 DAD", a.DAD[0], 1700+1200)
	near("dhclient run 1 rest", a.Rest[0], 3000-2900)
	near("dhclient run 2 DAD", a.DAD[1], 1000+1072)
	if len(a.Probe) != 0 {
		t.Errorf("dhclient has an ARP probe: %v", a.Probe)
	}
	// dhcpcd: ratios 3010/5310, 2000/4000, 3600/6000; the median the
	// middle one, 0.6.
	for i, w := range []float64{3010.0 / 5310, 0.5, 0.6} {
		near(fmt.Sprintf("dhcpcd ratio %d", i), d.Ratios[i], w)
	}
	near("dhcpcd median ratio", d.Ratio, 3010.0/5310)
	// Its DAD: the later link-local (the host's, then the router's),
	// plus the host's new address.
	near("dhcpcd run 1 DAD", d.DAD[0], 1900+1050)
	near("dhcpcd run 2 DAD", d.DAD[1], 1500+380)
	near("dhcpcd run 1 rest", d.Rest[0], 3010-2950)
	near("dhcpcd run 1 probe", d.Probe[0], 5000)
	near("dhcpcd run 1 v4 rest", d.Rest4[0], 310)

	var b strings.Builder
	v6timeTable(&b, res)
	for _, s := range []string{
		"| v6 / v4 | **75.00x** | 75.00x, 40.00x, 350.00x | **0.57x** | 0.57x, 0.50x, 0.60x |",
		"| v6: the host's address out of DAD | 3000 | 3000, 2731, 3276 | 3000 | 3000, 1990, 3550 |",
		"ARP probe begun (dhcpcd's log) | - | - | 500 | 300, 500, 900 |",
		"| v4: the host's first DISCOVER sent (dhcpcd's log) | - | - | 450 | 250, 450, 800 |",
		"| v4: of it in the host's ARP probe and wait (v4-lease - ACK) | - | - | 5000 | 5000, 3490, 5090 |",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}

	// A run without one of the moments is an error, not a zero.
	short := strings.Replace(out, "dhcpcd-v4-ack-ms", "x-ms", 1)
	if _, err := v6timeSummary(short); err == nil {
		t.Error("a run without dhcpcd-v4-ack-ms was summed up")
	}
	short = strings.Replace(out, "dhcpcd-v4-discover-ms", "x-ms", 1)
	if _, err := v6timeSummary(short); err == nil {
		t.Error("a run without dhcpcd-v4-discover-ms was summed up")
	}
	short = strings.Replace(out, "dhclient-v6-wanll-ms", "x-ms", 1)
	if _, err := v6timeSummary(short); err == nil {
		t.Error("a run without dhclient-v6-wanll-ms was summed up")
	}
	if _, err := v6timeSummary("PASS\n"); err == nil {
		t.Error("output without results was summed up")
	}
	if m := medianF([]float64{3, 1, 2, 10}); m != 3 {
		t.Errorf("median of four %v, want the upper middle 3", m)
	}
}
