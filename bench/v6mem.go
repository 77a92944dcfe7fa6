package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/build"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/boardvm"
	"github.com/ocfw/ocfw/internal/lab/isp6"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/site"
)

// v6memSite is an Avila's site (WAN by DHCP, one LAN with a DHCP
// server); the v6-off image appends v6memOff and nothing else, so the two
// images differ only in IPv6. On the stand-in its ports are USB cards
// wired to the world VM: the ISP (DHCPv4, dhcpd -6 delegating /60s,
// radvd) on the WAN, a host on the LAN.
const v6memSite = `kind: site
board: avila-gw2348
hostname: avila
wan:
  port: wan
  address: dhcp
lan:
  ports: [lan]
  address: 192.168.10.1/24
  dhcp:
    range: [192.168.10.100, 192.168.10.150]
firewall:
  wan_services: [ssh]
ssh:
  authorized_keys:
    - ssh-ed25519 ` + site.PlaceholderKey + ` bench@v6mem
`

const v6memOff = "ipv6: {enable: false}\n"

// v6memSettle is how long the router runs, once a LAN host reaches the
// WAN through it, before its memory is read.
const v6memSettle = 30 * time.Second

// v6memBudgetKiB is the goal: IPv6 on costs at most 2 MiB more.
const v6memBudgetKiB = 2048

type v6memSide struct {
	RSS      []uint64          `json:"rss_kib"`
	Peak     []uint64          `json:"peak_kib"`
	Services map[string]string `json:"services"` // from the last run's ocf net
	IPv6     []string          `json:"ipv6"`     // ocf net's IPv6 lines
}

type v6memResult struct {
	Machine string     `json:"machine"`
	On      *v6memSide `json:"on"`
	Off     *v6memSide `json:"off"`
	// Diffs are on - off of each pair booted one after the other.
	DiffRSS  []int64 `json:"diff_rss_kib"`
	DiffPeak []int64 `json:"diff_peak_kib"`
}

// runV6Mem is the v6mem section: the NSLU2's firmware built twice from
// one site config, IPv6 on (the default) and off, each booted on the ARM
// stand-in; after the boot and v6memSettle, ocf net on the console gives
// the firmware process's VmRSS and VmHWM (the router is that process).
func runV6Mem(ctx context.Context, r *runner) error {
	s := qemu.RaspiStandIn
	if err := qemu.Installed(s.Arch); err != nil {
		return err
	}
	deb, err := debian.CachedKernel(s.KernelPackage, s.DebianArch, "")
	if err != nil {
		return fmt.Errorf("the stand-in kernel (ocfw kernel fetch --board nslu2 --stand-in): %v", err)
	}
	cat, err := boards.Embedded()
	if err != nil {
		return err
	}
	pl, err := cat.Resolve(boards.Request{Board: "avila-gw2348", StandIn: true})
	if err != nil {
		return err
	}
	imgs := map[bool]string{}
	for _, on := range []bool{true, false} {
		data := v6memSite
		name := "v6mem-on.yaml"
		if !on {
			data, name = data+v6memOff, "v6mem-off.yaml"
		}
		st, b, err := cat.ParseSite(name, []byte(data))
		if err != nil {
			return err
		}
		if b.Name != pl.Board || st.IPv6.On() != on {
			return fmt.Errorf("%s: board %s, ipv6 on %v", name, b.Name, st.IPv6.On())
		}
		img := filepath.Join(r.tmp, strings.TrimSuffix(name, ".yaml")+".img")
		t0 := time.Now()
		if _, err := build.Build(ctx, pl, build.Options{Output: img, Kernel: deb, SourceDateEpoch: benchEpoch,
			Tool: "ocfw bench", Site: st, Boot: plan.Options{SpeedBudget: "2s"}}); err != nil {
			return err
		}
		r.logf("v6mem: built %s in %v", name, time.Since(t0).Round(time.Second))
		imgs[on] = img
	}
	w, err := v6memWorld(ctx, r)
	if err != nil {
		return err
	}
	defer w.Kill()
	res := &v6memResult{Machine: "qemu-system-arm -M raspi1ap (TCG), the Avila GW2348's firmware on its stand-in, WAN and LAN wired to a world VM", On: &v6memSide{}, Off: &v6memSide{}}
	// Pairs, the order alternating, so a change in the host's load falls
	// on both sides.
	for i := 0; i < r.trials; i++ {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		var rss, peak [2]uint64
		for _, on := range order {
			side := res.Off
			if on {
				side = res.On
			}
			m, err := v6memBoot(ctx, r, w, imgs[on], on)
			if err != nil {
				return fmt.Errorf("v6 on %v: %w", on, err)
			}
			side.RSS = append(side.RSS, m.RSS)
			side.Peak = append(side.Peak, m.Peak)
			side.Services, side.IPv6 = m.Services, m.IPv6
			k := 1
			if on {
				k = 0
			}
			rss[k], peak[k] = m.RSS, m.Peak
			r.logf("v6mem: v6 on %v: RSS %d KiB, peak %d KiB; services %v", on, m.RSS, m.Peak, m.Services)
		}
		res.DiffRSS = append(res.DiffRSS, int64(rss[0])-int64(rss[1]))
		res.DiffPeak = append(res.DiffPeak, int64(peak[0])-int64(peak[1]))
	}
	r.res.V6Mem = res
	d := medianInt(res.DiffRSS)
	r.res.goalMax("v6mem", "router RSS, IPv6 on minus off (avila-gw2348 on its ARM stand-in, WAN and LAN in use, median of pairs)", "<= 2048 KiB", "KiB", float64(d), v6memBudgetKiB)
	return nil
}

// v6memWorld starts the world VM: on eth0 the ISP (DHCPv4, an echo
// server; dhcpd -6 delegating /60s out of 2001:db8:1::/48 and radvd),
// routing the delegated prefixes to the router's WAN; on eth1 a LAN host
// with a fixed v4 address and the kernel's SLAAC.
func v6memWorld(ctx context.Context, r *runner) (*worldvm.World, error) {
	tree, err := isp6.Fetch(ctx, "", r.logf)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.tmp, "v6mem-world")
	w, err := worldvm.Start(ctx, worldvm.Config{Name: "world", Dir: dir, Timeout: 2 * time.Hour, Trees: []string{tree.Dir}, NICs: []qemu.NIC{
		{Listen: true, Socket: filepath.Join(r.tmp, "v6mem-wan.sock"), MAC: "52:54:00:0b:00:01"},
		{Listen: true, Socket: filepath.Join(r.tmp, "v6mem-lan.sock"), MAC: "52:54:00:0b:00:02"}}})
	if err != nil {
		return nil, fmt.Errorf("world VM: %w", err)
	}
	var failed error
	do := func(cmd string) string {
		if failed != nil {
			return ""
		}
		out, err := w.Do(ctx, cmd)
		if err != nil {
			failed = fmt.Errorf("world: %s: %w", cmd, err)
		}
		return out
	}
	for _, c := range []string{"ns wan eth0", "ns lan eth1", "addr wan eth0 198.51.100.1/24", "up wan eth0",
		"dhcp-server wan eth0 198.51.100.10 198.51.100.20 198.51.100.1 198.51.100.1 1h", "echo-server wan 7",
		"addr lan eth1 192.168.10.200/24", "up lan eth1", "route lan default 192.168.10.1"} {
		do(c)
	}
	v6memISP.Start(do)
	ll, err := isp6.LinkLocal(boardvm.PortMAC(0))
	if err != nil {
		w.Kill()
		return nil, err
	}
	do("route wan " + v6memISP.Pool.String() + " " + ll.String() + "%eth0")
	if failed != nil {
		w.Kill()
		return nil, failed
	}
	return w, nil
}

// v6memISP is the world's IPv6 ISP on the router's WAN link.
var v6memISP = isp6.ISP{NS: "wan", Interface: "eth0",
	Link: netip.MustParsePrefix("2001:db8:0:1::/64"), Addr: netip.MustParseAddr("2001:db8:0:1::1"),
	Pool: netip.MustParsePrefix("2001:db8:1::/48"), PDLength: 60}

// v6memBoot boots an image with its WAN and LAN wired to the world (a
// fresh card each time), waits until the LAN host reaches the WAN's echo
// server through it over v4 (and v6 when on), then v6memSettle, and
// reads ocf net.
func v6memBoot(ctx context.Context, r *runner, w *worldvm.World, img string, on bool) (*netMemory, error) {
	// The LAN host forgets the last router's prefixes: disabling IPv6
	// on the interface drops its addresses.
	for _, c := range []string{"sysctl lan net.ipv6.conf.eth1.disable_ipv6 1", "sysctl lan net.ipv6.conf.eth1.disable_ipv6 0"} {
		if _, err := w.Do(ctx, c); err != nil {
			return nil, err
		}
	}
	var got *netMemory
	_, err := boardvm.Run(ctx, img, boardvm.RunOptions{Timeout: 10 * time.Minute, PoweroffAfterReport: true, StandInSaid: true,
		Network: boardvm.Network{Ports: map[string]qemu.NIC{"wan": w.Peer(0, boardvm.PortMAC(0)), "lan": w.Peer(1, boardvm.PortMAC(1))}},
		Script: func(ctx context.Context, vm *qemu.VM) error {
			targets := []string{"198.51.100.1:7"}
			if on {
				targets = append(targets, "["+v6memISP.Addr.String()+"]:7")
			}
			t0 := time.Now()
			for _, to := range targets {
				for {
					out, err := w.Do(ctx, "tcp lan "+to+" v6mem")
					if err == nil && strings.Contains(out, "v6mem") {
						break
					}
					if time.Since(t0) > 4*time.Minute {
						return fmt.Errorf("the LAN host reaches no %s through the router: %v %q", to, err, out)
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(2 * time.Second):
					}
				}
			}
			r.logf("v6mem: the LAN host reached %s through the router %v after the boot sequence", strings.Join(targets, " and "), time.Since(t0).Round(time.Second))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(v6memSettle):
			}
			start := len(vm.Console())
			if err := vm.Send("ocf net; echo v6mem-''end\n"); err != nil {
				return err
			}
			if err := vm.WaitFor(ctx, "v6mem-end"); err != nil {
				return err
			}
			m, err := parseNetMemory(vm.Console()[start:])
			got = m
			return err
		}})
	if err != nil {
		return nil, err
	}
	if got == nil {
		return nil, fmt.Errorf("no ocf net output")
	}
	return got, nil
}

// netMemory is what v6mem reads from ocf net's text.
type netMemory struct {
	RSS, Peak uint64 // KiB
	Services  map[string]string
	IPv6      []string
}

var netMemRe = regexp.MustCompile(`memory: firmware process (\d+) KiB \(peak (\d+)\)`)

// parseNetMemory reads the memory line, the service lines and the lines
// that mention IPv6 from ocf net's output.
func parseNetMemory(out string) (*netMemory, error) {
	m := netMemRe.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("ocf net shows no memory line: %q", tail(out, 400))
	}
	n := &netMemory{Services: map[string]string{}}
	n.RSS, _ = strconv.ParseUint(m[1], 10, 64)
	n.Peak, _ = strconv.ParseUint(m[2], 10, 64)
	for _, line := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "service "); ok {
			if k, v, ok := strings.Cut(rest, ": "); ok {
				n.Services[k] = v
			}
		} else if strings.Contains(line, "IPv6") || strings.Contains(line, "ipv6") {
			n.IPv6 = append(n.IPv6, strings.TrimSpace(line))
		}
	}
	return n, nil
}

func medianU(v []uint64) uint64 {
	s := append([]uint64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func medianInt(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func v6memTable(b *strings.Builder, x *v6memResult) {
	fmt.Fprintf(b, "### IPv6 on against off: the router's memory (avila-gw2348)\n\n%s; one site config built twice, the second with `%s` added; each image booted %d time(s), alternating, from a fresh card, its WAN and LAN wired to the world VM; once the LAN host's TCP reaches the WAN's echo server through the router (v4, and v6 from its SLAAC address in the delegated prefix when on), `ocf net` read %v later: the firmware process's VmRSS and VmHWM (the router and every service are that one Go process). Goal: v6 on costs at most %d KiB more.\n\n",
		x.Machine, strings.TrimSpace(v6memOff), len(x.On.RSS), v6memSettle, v6memBudgetKiB)
	fmt.Fprintf(b, "| IPv6 | RSS KiB (median) | peak KiB (median) | runs (RSS) | services |\n|---|---|---|---|---|\n")
	for _, s := range []struct {
		name string
		x    *v6memSide
	}{{"on (default)", x.On}, {"off", x.Off}} {
		var svc []string
		for _, k := range sortedStrings(s.x.Services) {
			svc = append(svc, k+" "+s.x.Services[k])
		}
		fmt.Fprintf(b, "| %s | %d | %d | %v | %s |\n", s.name, medianU(s.x.RSS), medianU(s.x.Peak), s.x.RSS, strings.Join(svc, "; "))
	}
	fmt.Fprintf(b, "| on - off, pairs | %+d | %+d | %v | |\n\n", medianInt(x.DiffRSS), medianInt(x.DiffPeak), x.DiffRSS)
	if len(x.On.IPv6) > 0 {
		fmt.Fprintf(b, "The v6-on router's `ocf net` IPv6 lines: %s.\n\n", "`"+strings.Join(x.On.IPv6, "`; `")+"`")
	}
}

func sortedStrings(m map[string]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
