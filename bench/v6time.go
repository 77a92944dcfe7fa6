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

// v6timeMoments are the benchmark's metrics (each "NAME-ms", ms from
// the WAN link coming up), in the order the table shows them.
var v6timeMoments = []struct{ name, what string }{
	{"v4-wan", "v4: the router's WAN lease (ISC dhcpd -4)"},
	{"v4-lease", "v4: the host's lease from the router (Debian's dhclient)"},
	{"v4", "v4: the host's first ping to the ISP answered (through the router's NAT)"},
	{"v6-wanll", "v6: the router's WAN link-local address out of DAD"},
	{"v6-wanroute", "v6: the router's WAN default route (radvd's advertisement)"},
	{"v6-pd", "v6: the delegation on the LAN (ISC dhcpd -6, a /60)"},
	{"v6-ra", "v6: the host heard the prefix (its SLAAC address appears, tentative)"},
	{"v6-addr", "v6: the host's address out of DAD"},
	{"v6", "v6: the host's first ping6 to the ISP answered"},
}

type v6timeResult struct {
	// Runs are the iterations' moments, ms from the WAN link up.
	Runs []map[string]float64 `json:"runs_ms"`
	// Ratios are each run's v6 / v4.
	Ratios []float64 `json:"ratios"`
	Ratio  float64   `json:"ratio"` // their median
	// DAD is each run's time spent in duplicate address detection on
	// the v6 path: the router's WAN link-local (v6-wanll) and the
	// host's new address (v6-addr - v6-ra). Rest is v6 minus DAD.
	DAD  []float64 `json:"dad_ms"`
	Rest []float64 `json:"rest_ms"`
}

// v6timeSummary reads the benchmark's result lines from go test output:
// every run must have every moment.
func v6timeSummary(out string) (*v6timeResult, error) {
	res := &v6timeResult{}
	for _, g := range parseGoBench(out) {
		if g.Name != v6timeBench {
			continue
		}
		run := map[string]float64{}
		for _, m := range v6timeMoments {
			v, ok := g.Metrics[m.name+"-ms"]
			if !ok {
				return nil, fmt.Errorf("%s: a run without %s-ms: %v", v6timeBench, m.name, g.Metrics)
			}
			run[m.name] = v
		}
		if run["v4"] <= 0 {
			return nil, fmt.Errorf("%s: v4 took %v ms", v6timeBench, run["v4"])
		}
		res.Runs = append(res.Runs, run)
		res.Ratios = append(res.Ratios, run["v6"]/run["v4"])
		dad := run["v6-wanll"] + max(run["v6-addr"]-run["v6-ra"], 0)
		res.DAD = append(res.DAD, dad)
		res.Rest = append(res.Rest, run["v6"]-dad)
	}
	if len(res.Runs) == 0 {
		return nil, fmt.Errorf("no %s result in the output: %s", v6timeBench, tail(out, 600))
	}
	res.Ratio = medianF(res.Ratios)
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
		return fmt.Errorf("the benchmark skipped (it needs root for network namespaces, and Debian's isc-dhcp-server, radvd, isc-dhcp-client, iputils-ping): %s", tail(out, 400))
	}
	res, err := v6timeSummary(out)
	if err != nil {
		return err
	}
	r.res.V6Time = res
	for i, run := range res.Runs {
		r.logf("v6time: run %d: v4 %.0f ms, v6 %.0f ms (%.1fx); DAD %.0f ms of it", i+1, run["v4"], run["v6"], res.Ratios[i], res.DAD[i])
	}
	r.res.goalMax("v6time", fmt.Sprintf("WAN link up to a LAN host's first packet to the WAN, v6 / v4 (median of %d runs, both from the same moment)", len(res.Runs)),
		fmt.Sprintf("<= %.1fx", v6timeGoal), "x", res.Ratio, v6timeGoal)
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
	fmt.Fprintf(b, "### v6time. WAN link up to a LAN host's first packet to the WAN: IPv6 against IPv4\n\n"+
		"`go test ./router -bench %s` in network namespaces on this host: the ISP (ISC dhcpd -4, ISC dhcpd -6 delegating /60s, radvd), the router's own code in-process (dual stack, as it ships; its firewall with NAT in its namespace), one LAN host (Debian's dhclient, the kernel's SLAAC). "+
		"Before t0 the router runs as Start leaves it, its WAN port up without carrier, its LAN settled; at t0 the ISP's end of the WAN comes up and the host plugs in. Both families are timed from that one moment, %d run(s), a new lab each; "+
		"pings are sent every 50 ms until one is answered. Goal: v6 at most %.1fx v4. Times in ms from t0; the median is the upper middle one of an even count.\n\n", v6timeBench, len(x.Runs), v6timeGoal)
	fmt.Fprintf(b, "| moment | median ms | runs (ms) |\n|---|---|---|\n")
	for _, m := range v6timeMoments {
		var v []float64
		for _, run := range x.Runs {
			v = append(v, run[m.name])
		}
		fmt.Fprintf(b, "| %s | %.0f | %s |\n", m.what, medianF(v), joinF(v, "%.0f"))
	}
	fmt.Fprintf(b, "| v6 / v4 | **%.1fx** | %s |\n", x.Ratio, joinF(x.Ratios, "%.1fx"))
	fmt.Fprintf(b, "| v6: of it in DAD (the router's WAN link-local, the host's new address) | %.0f | %s |\n", medianF(x.DAD), joinF(x.DAD, "%.0f"))
	fmt.Fprintf(b, "| v6: the rest (exchanges, advertisements, the ping) | %.0f | %s |\n\n", medianF(x.Rest), joinF(x.Rest, "%.0f"))
}

func joinF(v []float64, format string) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf(format, x))
	}
	return strings.Join(s, ", ")
}
