package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/plan"
)

// The manage section: issue 22's numbers. One router VM between the two
// namespaces of a world VM (the internet on its WAN, a host on its LAN)
// takes a site change by `ocfw push` and a new system by `ocfw upgrade`;
// then the owner's other way, side by side in the same run: build an
// image with the change and boot the router from it, the card swapped
// (QEMU powered off and started on the new image). The LAN host sends a
// UDP datagram to an echo server on the WAN side every probeInterval
// through the router's NAT the whole time; each way's downtime is the
// world agent's longest outage (from the first datagram not answered to
// the next one answered).

// probeInterval is the steady stream's spacing: the downtime's
// resolution.
const probeInterval = 20 * time.Millisecond

// MACs of the router's ports (the e2e tests' own).
const (
	manageWANMAC  = "52:54:00:0a:00:01"
	manageLANMAC  = "52:54:00:0a:00:02"
	manageLAN2MAC = "52:54:00:0a:00:03"
)

// manageWay is one way of making a change: its time to done and the
// downtime the world saw.
type manageWay struct {
	Name string `json:"name"`
	// BuildS is the `ocfw build` of the image a reflash needs (0 for
	// push and upgrade, which send what they have).
	BuildS float64 `json:"build_s"`
	// ApplyS is push: the command to its exit, config confirmed;
	// upgrade: the command to its exit, system committed; reflash:
	// power off to the boot sequence's end with forwarding back.
	ApplyS float64 `json:"apply_s"`
	TotalS float64 `json:"total_s"`
	// OutageMS, Lost: the longest outage of the stream and the
	// datagrams lost in it; Probe is the agent's whole line.
	OutageMS int64 `json:"outage_ms"`
	Lost     int   `json:"lost"`
	// Late: datagrams answered over a second after they were sent
	// (queued by the LAN host's kernel while the router was away; they
	// count in the outage, not as forwarded).
	Late  int    `json:"late"`
	Probe string `json:"probe"`
	// Timeline: seconds from the action's start to the first console
	// line of each step after it (where the downtime goes).
	Timeline []mark `json:"timeline"`
}

type mark struct {
	What string  `json:"what"`
	S    float64 `json:"s"`
}

// timelineMarks are the router console's lines that place a restart:
// the old system stopping, the BIOS and kernel of the next boot, the
// router's network and firewall up, the boot sequence's end.
var timelineMarks = []struct{ what, text string }{
	{"upgrade written into the other slot", "upgrade to "},
	{"router resetting", "ocfw: resetting"},
	{"BIOS (power on or reset)", "SeaBIOS"},
	{"kernel starting", "Linux version"},
	{"LAN up", "network: LAN "},
	{"firewall up", "firewall: "},
	{"WAN address", "network: WAN "},
	{"boot sequence done", plan.MarkDone},
}

// watchConsole records, until stop is closed, when each of
// timelineMarks first appears on the console of the router VM cur()
// returns, after offset from (the console at the start) in the first
// VM; a new VM's console counts from its start.
func watchConsole(cur func() *qemu.VM, from int, stop <-chan struct{}) <-chan []mark {
	out := make(chan []mark, 1)
	go func() {
		t0 := time.Now()
		first := cur()
		seen := map[string]bool{}
		var marks []mark
		for {
			select {
			case <-stop:
				out <- marks
				return
			case <-time.After(50 * time.Millisecond):
			}
			vm := cur()
			if vm == nil {
				continue
			}
			con := vm.Console()
			if vm == first && from <= len(con) {
				con = con[from:]
			}
			for _, m := range timelineMarks {
				if !seen[m.what] && strings.Contains(con, m.text) {
					seen[m.what] = true
					marks = append(marks, mark{m.what, time.Since(t0).Seconds()})
				}
			}
		}
	}()
	return out
}

type manageResult struct {
	Board    string      `json:"board"`
	Change   string      `json:"change"`
	System   string      `json:"system_change"`
	Interval string      `json:"probe_interval"`
	Ways     []manageWay `json:"ways"`
	// PushRatio and UpgradeRatio: each way's total over its reflash's;
	// the downtime ratios the same for the outages.
	PushRatio, UpgradeRatio               float64
	PushDownRatio, UpgradeDownRatio       float64
	OldRevision, NewRevision, PushMessage string
}

func (m *manageResult) way(name string) *manageWay {
	for i := range m.Ways {
		if m.Ways[i].Name == name {
			return &m.Ways[i]
		}
	}
	return nil
}

// manageSite is the router's site config: WAN by DHCP, the LAN bridged
// over lan1 (the world's LAN host) and lan2 (QEMU's restricted user
// network with the host's SSH forward), SSH by key; extra port
// forwards are the pushed change.
func manageSite(key, forwards string) string {
	return `kind: site
board: ` + buildBoard + `
hostname: bench-gw
wan:
  port: wan
  address: dhcp
lan:
  ports: [lan1, lan2]
  address: 192.168.1.1/24
  dhcp:
    range: [192.168.1.100, 192.168.1.150]
firewall:
  port_forwards:
    - {proto: tcp, port: 8080, to: 192.168.1.100, to_port: 80}
` + forwards + `ssh:
  authorized_keys:
    - ` + key + `
`
}

func runManage(ctx context.Context, r *runner) error {
	dir := filepath.Join(r.tmp, "manage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pub, priv, err := manageKey()
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "id")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		return err
	}
	write := func(name, text string) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, []byte(text), 0o644)
	}
	site1, err := write("site.yaml", manageSite(pub, ""))
	if err != nil {
		return err
	}
	site2, err := write("site2.yaml", manageSite(pub, "    - {proto: tcp, port: 8081, to: 192.168.1.100, to_port: 81}\n"))
	if err != nil {
		return err
	}
	// The commands run as the owner runs them: the ocfw binary.
	bin := r.ocfwCommand(ctx)
	if bin == "" {
		return fmt.Errorf("cmd/ocfw does not build or has no build command")
	}
	ocfw := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.CommandContext(ctx, bin, args...)
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		code = cmd.ProcessState.ExitCode()
		if err != nil && code == 0 {
			code = -1
			errs.WriteString(err.Error())
		}
		return out.String(), errs.String(), code
	}
	res := &manageResult{Board: buildBoard, Interval: probeInterval.String(),
		Change: "a second port forward (the firewall and NAT restart)",
		System: "the same site, a system built with another speed budget (another revision)"}
	build := func(img, site, budget string) (float64, error) {
		t0 := time.Now()
		if out, errs, code := ocfw("build", "-o", img, "--board", buildBoard, "--cipher", "aes-128-cbc", "--speed-budget", budget, "--site", site); code != 0 {
			return 0, fmt.Errorf("ocfw build %s: exit %d: %s", img, code, tail(out+errs, 600))
		}
		return time.Since(t0).Seconds(), nil
	}
	// The image the router runs, then the two a reflash needs: the
	// changed site, and the new system; their build times are the
	// reflashes' first part.
	oldImg, siteImg, sysImg := filepath.Join(dir, "old.img"), filepath.Join(dir, "site2.img"), filepath.Join(dir, "new.img")
	if _, err := build(oldImg, site1, "1s"); err != nil {
		return err
	}
	siteBuild, err := build(siteImg, site2, "1s")
	if err != nil {
		return err
	}
	sysBuild, err := build(sysImg, site1, "2s")
	if err != nil {
		return err
	}
	r.logf("manage: builds %.0f s (changed site), %.0f s (new system)", siteBuild, sysBuild)
	for _, x := range []struct {
		img string
		rev *string
	}{{oldImg, &res.OldRevision}, {sysImg, &res.NewRevision}} {
		s, err := firmware.OpenSystem(x.img)
		if err != nil {
			return err
		}
		*x.rev = s.Manifest.System.Revision
		s.Close()
	}

	// The world: the internet on eth0 (DHCP for the router's WAN, a UDP
	// echo), the LAN host on eth1 with a fixed address (the admin's user
	// network on lan2 is bridged into the same LAN).
	w, err := worldvm.Start(ctx, worldvm.Config{Name: "world", Dir: filepath.Join(dir, "world"), Timeout: time.Hour, NICs: []qemu.NIC{
		{Listen: true, Socket: filepath.Join(dir, "wan.sock"), MAC: "52:54:00:0b:00:01"},
		{Listen: true, Socket: filepath.Join(dir, "lan.sock"), MAC: "52:54:00:0b:00:02"}}})
	if err != nil {
		return fmt.Errorf("world VM: %w", err)
	}
	defer w.Kill()
	do := func(cmd string) (string, error) {
		out, err := w.Do(ctx, cmd)
		if err != nil {
			return "", fmt.Errorf("world: %s: %w", cmd, err)
		}
		return out, nil
	}
	for _, c := range []string{"ns wan eth0", "ns lan eth1", "addr wan eth0 198.51.100.1/24", "up wan eth0",
		"dhcp-server wan eth0 198.51.100.10 198.51.100.20 198.51.100.1 198.51.100.1 1h", "udp-echo wan 7", "echo-server wan 7",
		"addr lan eth1 192.168.1.100/24", "up lan eth1", "route lan default 192.168.1.1"} {
		if _, err := do(c); err != nil {
			return err
		}
	}
	port, err := freeHostPort()
	if err != nil {
		return err
	}
	nics := []qemu.NIC{w.Peer(0, manageWANMAC), w.Peer(1, manageLANMAC),
		{MAC: manageLAN2MAC, RestrictedUser: true, UserNet: "192.168.1.0/24", UserHost: "192.168.1.254",
			Forwards: []qemu.Forward{{Proto: "tcp", HostPort: port, GuestAddr: "192.168.1.1", GuestPort: 22}}}}
	var (
		vmMu sync.Mutex
		vm   *qemu.VM
	)
	setVM := func(v *qemu.VM) {
		vmMu.Lock()
		vm = v
		vmMu.Unlock()
	}
	curVM := func() *qemu.VM {
		vmMu.Lock()
		defer vmMu.Unlock()
		return vm
	}
	defer func() {
		if v := curVM(); v != nil {
			v.Kill()
		}
	}()
	card := filepath.Join(dir, "card.img")
	// boot powers the router on from a card holding img (a fresh copy:
	// a reflashed card) and waits for its boot sequence's end and a
	// TCP echo from the LAN host through it.
	boot := func(img string) error {
		if _, err := r.run(ctx, nil, "cp", "--sparse=always", img, card); err != nil {
			return err
		}
		v, err := qemu.Start(ctx, qemu.Config{Disk: card, NICs: nics, Reboot: true, Timeout: time.Hour})
		if err != nil {
			return err
		}
		setVM(v)
		return waitForwarding(ctx, v, w, 1)
	}
	if err := boot(oldImg); err != nil {
		return err
	}
	r.logf("manage: router up, forwarding")
	// probe runs the steady stream around action and returns the
	// longest outage.
	probe := func(name string, action func() error) (*manageWay, error) {
		id := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(name) // the agent's words are space-separated
		if _, err := do("probe " + id + " lan 198.51.100.1:7 " + probeInterval.String()); err != nil {
			return nil, err
		}
		time.Sleep(2 * time.Second)
		stop := make(chan struct{})
		timeline := watchConsole(curVM, len(curVM().Console()), stop)
		t0 := time.Now()
		aerr := action()
		apply := time.Since(t0).Seconds()
		time.Sleep(3 * time.Second)
		close(stop)
		line, err := do("probe-end " + id)
		if aerr != nil {
			return nil, fmt.Errorf("%s: %w", name, aerr)
		}
		if err != nil {
			return nil, err
		}
		way := &manageWay{Name: name, ApplyS: apply, Probe: line, Timeline: <-timeline}
		var sent, got, lost, dups, last, from int
		if _, err := fmt.Sscanf(line, "sent %d received %d lost %d dups %d last-lost %d outage-ms %d outage-lost %d outage-from %d late %d",
			&sent, &got, &lost, &dups, &last, &way.OutageMS, &way.Lost, &from, &way.Late); err != nil {
			return nil, fmt.Errorf("%s: the probe's line %q: %v", name, line, err)
		}
		if last == sent && sent > 0 {
			return nil, fmt.Errorf("%s: the stream was not back when it ended: %s", name, line)
		}
		r.logf("manage: %s: %.1f s; %s; console: %s", name, apply, line, marksText(way.Timeline))
		return way, nil
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	knownHosts := filepath.Join(dir, "known_hosts")
	push, err := probe("push", func() error {
		out, errs, code := ocfw("push", "-i", keyFile, "--known-hosts", knownHosts, "--accept-new", site2, host)
		res.PushMessage = strings.TrimSpace(out)
		if code != 0 || !strings.Contains(out, "confirmed") {
			return fmt.Errorf("ocfw push: exit %d: %s%s", code, out, errs)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.Ways = append(res.Ways, *push)
	upgrade, err := probe("upgrade", func() error {
		args := []string{"upgrade", "--port", strconv.Itoa(port), "--identity", keyFile,
			"--known-hosts", knownHosts, "--accept-new", "--wait", "30m", sysImg, "127.0.0.1"}
		out, errs, code := ocfw(args...)
		if code != 0 || !strings.Contains(out, "upgrade to "+res.NewRevision+" committed") {
			return fmt.Errorf("ocfw upgrade: exit %d: %s%s", code, out, errs)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.Ways = append(res.Ways, *upgrade)
	// The owner's other way: the image built (above, while the router
	// ran), the router powered off, the card swapped, powered on.
	for _, x := range []struct {
		name, img string
		build     float64
	}{{"reflash (site change)", siteImg, siteBuild}, {"reflash (new system)", sysImg, sysBuild}} {
		way, err := probe(x.name, func() error {
			curVM().Kill()
			setVM(nil)
			return boot(x.img)
		})
		if err != nil {
			return err
		}
		way.BuildS = x.build
		res.Ways = append(res.Ways, *way)
	}
	for i := range res.Ways {
		res.Ways[i].TotalS = res.Ways[i].BuildS + res.Ways[i].ApplyS
	}
	ps, us := res.way("push"), res.way("upgrade")
	rp, ru := res.way("reflash (site change)"), res.way("reflash (new system)")
	res.PushRatio, res.UpgradeRatio = ps.TotalS/rp.TotalS, us.TotalS/ru.TotalS
	if rp.OutageMS > 0 {
		res.PushDownRatio = float64(ps.OutageMS) / float64(rp.OutageMS)
	}
	if ru.OutageMS > 0 {
		res.UpgradeDownRatio = float64(us.OutageMS) / float64(ru.OutageMS)
	}
	r.res.goalMax("manage", "ocfw push to a confirmed config vs rebuild and reflash, time", "< 1.0x", "x", res.PushRatio, 1.0)
	r.res.goalMax("manage", "ocfw upgrade to a committed system vs rebuild and reflash, downtime seen from the world", "<= 1.0x", "x", res.UpgradeDownRatio, 1.0)
	r.res.Manage = res
	return nil
}

// waitForwarding waits for the n-th end of a boot sequence on the
// console and then for a TCP echo from the world's LAN host to its WAN
// side through the router.
func waitForwarding(ctx context.Context, vm *qemu.VM, w *worldvm.World, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	for strings.Count(vm.Console(), plan.MarkDone) < n {
		if vm.Exited() {
			return fmt.Errorf("the router stopped before its boot sequence ended:\n%s", vm.Tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the router's boot sequence did not end: %v\n%s", ctx.Err(), vm.Tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
	var last error
	for ctx.Err() == nil {
		out, err := w.Do(ctx, "timeout=2s tcp lan 198.51.100.1:7 through")
		if err == nil && strings.Contains(out, "through") {
			return nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("no TCP echo through the router after its boot: %v\n%s", last, vm.Tail(30))
}

func marksText(ms []mark) string {
	var s []string
	for _, m := range ms {
		s = append(s, fmt.Sprintf("%s %.1f s", m.What, m.S))
	}
	return strings.Join(s, ", ")
}

func manageKey() (string, []byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", nil, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "bench")
	if err != nil {
		return "", nil, err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " bench@host", pem.EncodeToMemory(blk), nil
}

func freeHostPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func manageTable(b *strings.Builder, m *manageResult) {
	fmt.Fprintf(b, "### 10. Managing the box: `ocfw push` and `ocfw upgrade` vs rebuilding and reflashing, one world VM\n\n")
	fmt.Fprintf(b, "The %s firmware in QEMU (`-cpu pentium2`, TCG) between a world VM's WAN namespace (DHCP, UDP echo) and a LAN host, the admin's SSH on lan2 through QEMU's restricted user network. Site change: %s. New system: %s (%s → %s). Reflash: `ocfw build` of the changed image while the router runs, then QEMU powered off and started on a fresh copy of the new image (the card swapped), until the boot sequence's end and a TCP echo through the router. Downtime: the LAN host sends a UDP datagram to the WAN echo every %s through the router's NAT; the longest outage, a run of datagrams not answered or answered over a second late (the LAN host's kernel queues datagrams while it cannot reach the router and sends them once it is back), from the sending of its first to that of the next one answered in time. One run of each, in this order on one boot: push, upgrade, reflash (site change), reflash (new system).\n\n",
		m.Board, m.Change, m.System, m.OldRevision, m.NewRevision, m.Interval)
	fmt.Fprintf(b, "| way | ocfw build s | apply s | total s | downtime s | datagrams not forwarded in it | answered late (whole stream) |\n|---|---|---|---|---|---|---|\n")
	for _, w := range m.Ways {
		fmt.Fprintf(b, "| %s | %.1f | %.1f | %.1f | %.2f | %d | %d |\n", w.Name, w.BuildS, w.ApplyS, w.TotalS, float64(w.OutageMS)/1000, w.Lost, w.Late)
	}
	fmt.Fprintf(b, "\n| ratio | time | downtime |\n|---|---|---|\n")
	fmt.Fprintf(b, "| push / reflash (site change) | %.2fx | %.2fx |\n", m.PushRatio, m.PushDownRatio)
	fmt.Fprintf(b, "| upgrade / reflash (new system) | %.2fx | %.2fx |\n\n", m.UpgradeRatio, m.UpgradeDownRatio)
	fmt.Fprintf(b, "apply: push and upgrade, the command until it exits (config confirmed; system committed); reflash, power-off until forwarding is back after the boot sequence. A reflashed card also loses what the data partition kept (reports, leases, the SSH host key, pushed configs); push and upgrade keep it. Probe lines:\n\n")
	for _, w := range m.Ways {
		fmt.Fprintf(b, "- %s: `%s`\n", w.Name, w.Probe)
	}
	fmt.Fprintf(b, "\nWhere the time goes: seconds from the start of each way (push, upgrade: the command; reflash: the power off) to the first router console line of each step after it.\n\n")
	for _, w := range m.Ways {
		fmt.Fprintf(b, "- %s: %s\n", w.Name, marksText(w.Timeline))
	}
	fmt.Fprintf(b, "\n")
}
