package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// v6timeBench is router's benchmark the v6time section runs: one lab
// per iteration, both families timed from the same moment (see its
// comment in router/v6time_netns_test.go).
const v6timeBench = "BenchmarkFirstGlobalPacket"

// v6timeGoal: a LAN host's first v6 packet takes at most 1.2x as long
// as its first v4 one (issue 30).
const v6timeGoal = 1.2

// v6timeVariants are the benchmark's LAN hosts: each iteration runs
// one lab per variant, and a variant's metrics are named
// "VARIANT-MOMENT-ms", ms from the WAN link coming up.
var v6timeVariants = []struct{ name, what string }{
	{"dhclient", "Debian's dhclient (v4, no address-conflict detection) and the kernel's SLAAC (v6)"},
	{"dhcpcd", "Debian's dhcpcd on its defaults, both families (v4 with its ARP probe, SLAAC itself)"},
}

// v6timeMoments are the moments, in the order the table shows them;
// only names the one variant that has the moment ("" for all).
var v6timeMoments = []struct{ name, what, only string }{
	{"v4-wan", "v4: the router's WAN lease (ISC dhcpd -4)", ""},
	{"v4-discover", "v4: the host's first DISCOVER sent (dhcpcd's log)", "dhcpcd"},
	{"v4-ack", "v4: the router's ACK in, the host's ARP probe begun (dhcpcd's log)", "dhcpcd"},
	{"v4-lease", "v4: the host's address from the router's lease", ""},
	{"v4", "v4: the host's first ping to the ISP answered (through the router's NAT)", ""},
	{"v6-wanll", "v6: the router's WAN link-local address out of DAD", ""},
	{"v6-wanroute", "v6: the router's WAN default route (radvd's advertisement)", ""},
	{"v6-pd", "v6: the delegation on the LAN (ISC dhcpd -6, a /60)", ""},
	{"v6-hostll", "v6: the host's link-local address out of DAD", ""},
	{"v6-ra", "v6: the host heard the prefix (its address in it appears, tentative)", ""},
	{"v6-addr", "v6: the host's address out of DAD", ""},
	{"v6", "v6: the host's first ping6 to the ISP answered", ""},
}

// v6timeVariant is one LAN host's results.
type v6timeVariant struct {
	Name string `json:"name"`
	// Runs are the iterations' moments, ms from the WAN link up.
	Runs []map[string]float64 `json:"runs_ms"`
	// Ratios are each run's v6 / v4.
	Ratios []float64 `json:"ratios"`
	Ratio  float64   `json:"ratio"` // their median
	// DAD is each run's time spent waiting for duplicate address
	// detection on the v6 path: before the host hears the prefix, the
	// router's WAN link-local address (its DHCPv6 client sends from it)
	// and, for dhcpcd, which solicits only from its own link-local
	// address, that one too (the later of the two, as they run side by
	// side from t0); then the host's new address (v6-addr - v6-ra).
	// Rest is v6 minus DAD.
	DAD  []float64 `json:"dad_ms"`
	Rest []float64 `json:"rest_ms"`
	// Probe is each run's time in the host's ARP probe and wait before
	// it takes its lease (v4-lease - v4-ack; dhcpcd only, RFC 5227);
	// Rest4 is v4 minus it.
	Probe []float64 `json:"probe_ms,omitempty"`
	Rest4 []float64 `json:"rest4_ms,omitempty"`
}

type v6timeResult struct {
	Variants []*v6timeVariant `json:"variants"`
}

// v6timeSummary reads the benchmark's result lines from go test output:
// every run must have every moment of every variant.
func v6timeSummary(out string) (*v6timeResult, error) {
	res := &v6timeResult{}
	for _, v := range v6timeVariants {
		res.Variants = append(res.Variants, &v6timeVariant{Name: v.name})
	}
	for _, g := range parseGoBench(out) {
		if g.Name != v6timeBench {
			continue
		}
		for _, x := range res.Variants {
			run := map[string]float64{}
			for _, m := range v6timeMoments {
				if m.only != "" && m.only != x.Name {
					continue
				}
				v, ok := g.Metrics[x.Name+"-"+m.name+"-ms"]
				if !ok {
					return nil, fmt.Errorf("%s: a run without %s-%s-ms: %v", v6timeBench, x.Name, m.name, g.Metrics)
				}
				run[m.name] = v
			}
			if run["v4"] <= 0 {
				return nil, fmt.Errorf("%s: %s's v4 took %v ms", v6timeBench, x.Name, run["v4"])
			}
			x.Runs = append(x.Runs, run)
			x.Ratios = append(x.Ratios, run["v6"]/run["v4"])
			before := run["v6-wanll"]
			if x.Name == "dhcpcd" {
				before = max(before, run["v6-hostll"])
			}
			dad := before + max(run["v6-addr"]-run["v6-ra"], 0)
			x.DAD = append(x.DAD, dad)
			x.Rest = append(x.Rest, run["v6"]-dad)
			if _, ok := run["v4-ack"]; ok {
				probe := max(run["v4-lease"]-run["v4-ack"], 0)
				x.Probe = append(x.Probe, probe)
				x.Rest4 = append(x.Rest4, run["v4"]-probe)
			}
		}
	}
	if len(res.Variants[0].Runs) == 0 {
		return nil, fmt.Errorf("no %s result in the output: %s", v6timeBench, tail(out, 600))
	}
	for _, x := range res.Variants {
		x.Ratio = medianF(x.Ratios)
	}
	return res, nil
}

// runV6Time is the v6time section: router's BenchmarkFirstGlobalPacket,
// -trials iterations (a fresh namespace lab each), as root on this host.
func runV6Time(ctx context.Context, r *runner) error {
	bin, err := r.goTestBinary(ctx, "./router", "router.test")
	if err != nil {
		return err
	}
	out, err := r.runIn(ctx, "router", nil, bin, "-test.run", "^$", "-test.bench", "^"+v6timeBench+"$",
		"-test.benchtime", "1x", "-test.count", strconv.Itoa(r.trials), "-test.timeout", "30m")
	if err != nil {
		return err
	}
	if strings.Contains(out, "--- SKIP: "+v6timeBench) {
		return fmt.Errorf("the benchmark skipped (it needs root for network namespaces, and Debian's isc-dhcp-server, radvd, isc-dhcp-client, dhcpcd-base, iputils-ping): %s", tail(out, 400))
	}
	res, err := v6timeSummary(out)
	if err != nil {
		return err
	}
	r.res.V6Time = res
	for vi, x := range res.Variants {
		for i, run := range x.Runs {
			r.logf("v6time: %s run %d: v4 %.0f ms, v6 %.0f ms (%.1fx); DAD %.0f ms of v6", x.Name, i+1, run["v4"], run["v6"], x.Ratios[i], x.DAD[i])
		}
		r.res.goalMax("v6time-"+x.Name, fmt.Sprintf("WAN link up to a LAN host's first packet to the WAN, v6 / v4, the host %s (median of %d runs, both families from the same moment)", v6timeVariants[vi].what, len(x.Runs)),
			fmt.Sprintf("<= %.1fx", v6timeGoal), "x", x.Ratio, v6timeGoal)
	}
	return nil
}

// medianF is the median (the upper middle one of an even count, as
// medianInt).
func medianF(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func v6timeTable(b *strings.Builder, x *v6timeResult) {
	n := len(x.Variants[0].Runs)
	fmt.Fprintf(b, "### v6time. WAN link up to a LAN host's first packet to the WAN: IPv6 against IPv4\n\n"+
		"`go test ./router -bench %s` in network namespaces on this host: the ISP (ISC dhcpd -4, ISC dhcpd -6 delegating /60s, radvd), the router's own code in-process (dual stack, as it ships; its firewall with NAT in its namespace), one LAN host. "+
		"Before t0 the router runs as Start leaves it, its WAN port up without carrier, its LAN settled; at t0 the ISP's end of the WAN comes up and the host plugs in. Both families are timed from that one moment. "+
		"Two LAN hosts, a new lab for each in every run, one after the other: ", v6timeBench)
	for i, v := range v6timeVariants {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(b, "**%s**, %s", v.name, v.what)
	}
	fmt.Fprintf(b, ". %d run(s); pings are sent every 50 ms until one is answered. Goal: v6 at most %.1fx v4. Times in ms from t0; the median is the upper middle one of an even count.\n\n", n, v6timeGoal)
	b.WriteString("| moment |")
	for _, v := range x.Variants {
		fmt.Fprintf(b, " %s: median ms | %s: runs (ms) |", v.Name, v.Name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|---|", len(x.Variants)) + "\n")
	row := func(what string, cell func(v *v6timeVariant) (string, string)) {
		fmt.Fprintf(b, "| %s |", what)
		for _, v := range x.Variants {
			m, runs := cell(v)
			fmt.Fprintf(b, " %s | %s |", m, runs)
		}
		b.WriteString("\n")
	}
	series := func(s []float64) (string, string) {
		if len(s) == 0 {
			return "-", "-"
		}
		return fmt.Sprintf("%.0f", medianF(s)), joinF(s, "%.0f")
	}
	for _, m := range v6timeMoments {
		row(m.what, func(v *v6timeVariant) (string, string) {
			var s []float64
			for _, run := range v.Runs {
				if t, ok := run[m.name]; ok {
					s = append(s, t)
				}
			}
			return series(s)
		})
	}
	row("v6 / v4", func(v *v6timeVariant) (string, string) {
		return fmt.Sprintf("**%.2fx**", v.Ratio), joinF(v.Ratios, "%.2fx")
	})
	row("v4: of it in the host's ARP probe and wait (v4-lease - ACK)", func(v *v6timeVariant) (string, string) { return series(v.Probe) })
	row("v4: the rest (dhcpcd's random start, the exchanges, the ping)", func(v *v6timeVariant) (string, string) { return series(v.Rest4) })
	row("v6: of it in DAD (before the prefix is heard: the router's WAN link-local, for dhcpcd the later of it and the host's link-local; then the host's new address)", func(v *v6timeVariant) (string, string) { return series(v.DAD) })
	row("v6: the rest (exchanges, advertisements, the ping)", func(v *v6timeVariant) (string, string) { return series(v.Rest) })
	b.WriteString("\n")
}

func joinF(v []float64, format string) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf(format, x))
	}
	return strings.Join(s, ", ")
}
