package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/cli"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/vmtest"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/store"
)

// pushSite is the push test's site: one LAN port on QEMU's restricted
// user network (which carries the host's SSH forward to 192.168.1.1),
// the WAN on another; extra is added at the end of the lan section.
func pushSite(key, hostname, lanAddr, extraLAN, firewall string) string {
	return `kind: site
board: alix2d13
hostname: ` + hostname + `
wan:
  port: wan
  address: dhcp
lan:
  ports: [lan1]
  address: ` + lanAddr + `
  dhcp:
    range: [192.168.1.100, 192.168.1.150]
` + extraLAN + firewall + `ssh:
  authorized_keys:
    - ` + key + `
  rsa_host_key: false
`
}

// boardSSH talks to the router through the host forward, as a client
// nobody here wrote would (the host key is not what is tested here).
type boardSSH struct {
	addr string
	cfg  *ssh.ClientConfig
}

func (b *boardSSH) run(cmd string, stdin []byte) (string, error) {
	c, err := ssh.Dial("tcp", b.addr, b.cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	// Two buffers: x/crypto/ssh copies each stream in its own
	// goroutine, and one bytes.Buffer read into twice at once loses data.
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr = &out, &errOut
	if stdin != nil {
		s.Stdin = bytes.NewReader(stdin)
	}
	err = s.Run(cmd)
	return out.String() + errOut.String(), err
}

// wait runs cmd until it works or d has passed, trying every 250 ms: a
// failed try costs next to no CPU, and every second between the box
// answering and the next try is a second added to each of the test's
// ten boots.
func (b *boardSSH) wait(t *testing.T, vm *qemu.VM, cmd string, d time.Duration) string {
	t.Helper()
	var last error
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		out, err := b.run(cmd, nil)
		if err == nil {
			return out
		}
		last = err
	}
	t.Fatalf("ssh %q did not answer within %v: %v\n%s", cmd, d, last, vm.Tail(40))
	return ""
}

// bootDone waits for the end of the boot sequence: the self-test and the
// ESP measurement are not what a push races.
func bootDone(t *testing.T, vm *qemu.VM) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := vm.WaitFor(ctx, plan.MarkDone); err != nil {
		t.Fatalf("the boot sequence did not end: %v\n%s", err, vm.Tail(30))
	}
}

func freeTCPPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dataPartitionClean runs fsck.fat -n on the image's data partition (the
// second MBR entry).
func dataPartitionClean(t *testing.T, img string) {
	t.Helper()
	b, err := os.ReadFile(img)
	must(t, err)
	e := b[0x1be+16:]
	start, size := int64(binary.LittleEndian.Uint32(e[8:]))*512, int64(binary.LittleEndian.Uint32(e[12:]))*512
	p := filepath.Join(t.TempDir(), "data.part")
	must(t, os.WriteFile(p, b[start:start+size], 0o600))
	if out, err := exec.Command("fsck.fat", "-n", p).CombinedOutput(); err != nil || strings.Contains(strings.ToLower(string(out)), "dirty") {
		t.Errorf("fsck.fat -n on the data partition: %v\n%s", err, out)
	}
}

// TestPushConfig boots the ALIX firmware as a router once and pushes site
// configs to it with ocfw push: a malformed one refused on the PC and,
// sent by hand, on the box; a good one applied live, confirmed and kept
// over a reboot; one that moves the LAN address away from the SSH
// forward rolled back by the box itself. OpenSSH's scp and sftp then
// read the card's files, upload into staging only, and push by hand.
func TestPushConfig(t *testing.T) {
	needEndToEnd(t)
	parallel(t, 1) // one guest: it runs beside another test's
	dir := t.TempDir()
	pub, priv := testKey(t)
	keyFile := filepath.Join(dir, "id")
	must(t, os.WriteFile(keyFile, priv, 0o600))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	first := write("site.yaml", pushSite(pub, "push-gw", "192.168.1.1/24", "", ""))
	img := filepath.Join(dir, "gw.img")
	// No ESP run (--esp-budget 0s): it is not what is pushed to, and the
	// test boots this image ten times.
	buildImage(t, img, "--board", "alix2d13", "--cipher", "aes-128-cbc", "--speed-budget", "1s", "--esp-budget", "0s", "--site", first)

	port := freeTCPPort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	nics := []qemu.NIC{
		{MAC: "52:54:00:0f:00:01", RestrictedUser: true},
		{MAC: "52:54:00:0f:00:02", RestrictedUser: true, UserNet: "192.168.1.0/24", UserHost: "192.168.1.254",
			Forwards: []qemu.Forward{{Proto: "tcp", HostPort: port, GuestAddr: "192.168.1.1", GuestPort: 22}}},
		{MAC: "52:54:00:0f:00:03", Unplugged: true},
	}
	signer, err := ssh.ParsePrivateKey(priv)
	must(t, err)
	b := &boardSSH{addr: host, cfg: &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}}
	knownHosts := filepath.Join(dir, "known_hosts")
	push := func(args ...string) (string, string, int) {
		t.Helper()
		start := time.Now()
		out, errs, code := ocfw(t, append(append([]string{"push", "-i", keyFile, "--known-hosts", knownHosts}, args...), host)...)
		t.Logf("ocfw push %v: exit %d after %v\n%s%s", args, code, time.Since(start).Round(time.Second), out, errs)
		return out, errs, code
	}

	top := t // the guests live as long as the whole test, not one subtest
	vm := vmtest.Start(t, img, vmtest.Options{Name: "gw", NICs: nics})
	bootDone(t, vm)
	b.wait(t, vm, "true", 5*time.Minute)

	t.Run("unknown host key refused", func(t *testing.T) {
		_, errs, code := push(first)
		if code == 0 || !strings.Contains(errs, "is not in "+knownHosts) || !strings.Contains(errs, "--host-key SHA256:") {
			t.Errorf("push to an unknown box: exit %d, %s", code, errs)
		}
	})
	t.Run("malformed refused on the PC", func(t *testing.T) {
		bad := write("bad.yaml", pushSite(pub, "push-gw", "192.168.1.1/33", "", ""))
		_, errs, code := push("--accept-new", bad)
		if code == 0 || !strings.Contains(errs, "bad.yaml:") || !strings.Contains(errs, "nothing was sent") {
			t.Errorf("push of a bad config: exit %d, %s", code, errs)
		}
	})
	t.Run("malformed refused on the box", func(t *testing.T) {
		for _, c := range []struct{ site, want string }{
			{`{"kind": "site", "hostname": `, "pushed site.json"},
			{strings.Replace(`{"kind":"site","board":"alix2d13","hostname":"x","wan":{"port":"wan","address":"dhcp"},"lan":{"ports":["lan1"],"address":"192.168.1.1/33"},"ssh":{"authorized_keys":["KEY"]}}`, "KEY", pub, 1), "lan.address"},
		} {
			var tar bytes.Buffer
			must(t, config.WriteBundle(&tar, []byte(c.site), nil))
			if out, err := b.run("ocf config stage", tar.Bytes()); err != nil {
				t.Fatalf("ocf config stage: %v\n%s", err, out)
			}
			out, err := b.run("ocf config apply --confirm-within 20s", nil)
			if err == nil || !strings.Contains(out, "refused by the box") || !strings.Contains(out, c.want) {
				t.Errorf("ocf config apply of %.30q: %v\n%s", c.site, err, out)
			}
		}
		if out, _ := b.run("ocf config status", nil); !strings.Contains(out, "no config was ever pushed") {
			t.Errorf("after the refusals: %s", out)
		}
	})
	good := write("good.yaml", pushSite(pub, "push-gw2", "192.168.1.1/24",
		"    static:\n      - {mac: \"52:54:00:12:34:56\", ip: 192.168.1.20, name: nas}\n",
		"firewall:\n  port_forwards:\n    - {proto: tcp, port: 8080, to: 192.168.1.20, to_port: 80}\n"))
	t.Run("applied and confirmed", func(t *testing.T) {
		out, _, code := push("--accept-new", good)
		if code != 0 || !strings.Contains(out, "pushed config 1 confirmed") {
			t.Fatalf("push: exit %d\n%s", code, out)
		}
		if h, err := b.run("cat /proc/sys/kernel/hostname", nil); err != nil || strings.TrimSpace(h) != "push-gw2" {
			t.Errorf("hostname after the push: %q, %v", h, err)
		}
		con := vm.Console()
		for _, want := range []string{"config: applying [hostname firewall dhcp] live", "tcp 8080 to 192.168.1.20:80"} {
			if !strings.Contains(con, want) {
				t.Errorf("the console does not say %q", want)
			}
		}
		if strings.Contains(con, "dns stopped") || strings.Contains(con, "ssh stopped") {
			t.Errorf("a service failed on the live apply:\n%s", vm.Tail(30))
		}
	})
	t.Run("cut off and rolled back", func(t *testing.T) {
		moved := write("moved.yaml", pushSite(pub, "push-gw2", "192.168.1.2/24",
			"    static:\n      - {mac: \"52:54:00:12:34:56\", ip: 192.168.1.20, name: nas}\n",
			"firewall:\n  port_forwards:\n    - {proto: tcp, port: 8080, to: 192.168.1.20, to_port: 80}\n"))
		start := time.Now()
		// The shortest window the box takes: nothing can confirm this
		// one, so the window is only waited out.
		_, errs, code := push("--timeout", "10s", moved)
		if code == 0 || !strings.Contains(errs, "could not reconnect") || !strings.Contains(errs, "rolls back") {
			t.Fatalf("push of a config that moves the LAN: exit %d, %s", code, errs)
		}
		out := b.wait(t, vm, "ocf config status", time.Minute)
		t.Logf("SSH answers again %v after the push began", time.Since(start).Round(time.Second))
		if !strings.Contains(out, "not confirmed within 10s: rolled back") || !strings.Contains(out, "boots pushed config 1") {
			t.Errorf("status after the rollback: %s", out)
		}
	})
	t.Run("kept over a reboot", func(t *testing.T) {
		vmtest.PowerOff(t, vm)
		dataPartitionClean(t, img)
		vm = vmtest.Start(top, img, vmtest.Options{Name: "gw-again", NICs: nics}) // outlives this subtest
		bootDone(t, vm)
		if h := b.wait(t, vm, "cat /proc/sys/kernel/hostname", 5*time.Minute); strings.TrimSpace(h) != "push-gw2" {
			t.Errorf("hostname after the reboot: %q", h)
		}
		if !strings.Contains(vm.Console(), "site config: pushed config 1") {
			t.Errorf("the boot does not say it runs the pushed config")
		}
	})
	t.Run("OpenSSH scp and sftp", func(t *testing.T) {
		// The running config is pushed config 1 (the boot's); the push
		// by hand adds a static lease to it.
		nextYAML := write("printer.yaml", pushSite(pub, "push-gw2", "192.168.1.1/24",
			"    static:\n      - {mac: \"52:54:00:12:34:56\", ip: 192.168.1.20, name: nas}\n"+
				"      - {mac: \"52:54:00:12:34:57\", ip: 192.168.1.21, name: printer}\n",
			"firewall:\n  port_forwards:\n    - {proto: tcp, port: 8080, to: 192.168.1.20, to_port: 80}\n"))
		nextJSON := filepath.Join(dir, "printer.json")
		if _, errs, code := ocfw(t, "site", "json", nextYAML, "-o", nextJSON); code != 0 {
			t.Fatalf("ocfw site json: %s", errs)
		}
		next, err := os.ReadFile(nextJSON)
		must(t, err)
		sftpOnTheBoard(t, boardOpenSSH{key: keyFile, known: filepath.Join(dir, "openssh_known_hosts"), port: port},
			`"name": "nas"`, next, `"name": "printer"`)
	})
	if t.Failed() {
		return
	}
	// Power cuts at moments of a push, its confirm and a rollback, each
	// found on the console (the store announces its writes there). A
	// push's last moment kills QEMU and the next boot runs the old or the
	// new config, whole; at the moments before it the card is copied with
	// QEMU stopped (vmtest.CutCopy: what a kill then would leave), and the
	// config the copy boots is read from its store as the boot reads it
	// (config.AtBoot). The data partition stays clean either way. Two
	// boots, where one after each cut were eight (issue 29).
	hostname := "push-gw2"
	type moment struct {
		name string
		at   string // console text to cut at (its n-th occurrence in this push)
		n    int
		want string
	}
	for i, p := range []struct {
		moveLAN bool // push a config that cuts SSH off: it rolls back
		moments []moment
	}{
		{false, []moment{
			{"provisional write", "store: writing value site_push", 1, "old"},
			{"accepted", "config: pushed config", 1, "old"},
			{"services restarting", "config: applying", 1, "old"},
			{"applied", "config: pushed config", 2, "old"}, // "... applied"
			{"confirm write", "store: writing value site_push", 2, "either"},
			{"confirmed", "confirmed at", 1, "new"},
		}},
		{true, []moment{
			{"rollback write", "store: writing value site_push", 2, "old"},
			{"rollback restarting", "config: applying", 2, "old"},
		}},
	} {
		t.Run(fmt.Sprintf("power cuts in push %d", i+1), func(t *testing.T) {
			next := fmt.Sprintf("cut-%d", i+1)
			lan, within := "192.168.1.1/24", "20s"
			if p.moveLAN {
				// Never confirmed: the shortest window the box takes.
				lan, within = "192.168.1.2/24", "10s"
			}
			f := write(next+".yaml", pushSite(pub, next, lan, "", ""))
			// What the box boots now, read from a copy: the card is live.
			now := filepath.Join(t.TempDir(), "now.img")
			vmtest.CutCopy(t, vm, img, now)
			oldGen := bootGen(t, now)
			os.Remove(now)
			from := len(vm.Console())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			var out, errs bytes.Buffer
			go func() {
				defer close(done)
				cli.Run(ctx, []string{"push", "-i", keyFile, "--known-hosts", knownHosts, "--timeout", within, f, host}, &out, &errs)
			}()
			for k, m := range p.moments {
				last := k == len(p.moments)-1
				seen := false
				for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
					if strings.Count(vm.Console()[from:], m.at) >= m.n {
						seen = true
						break
					}
				}
				if !seen {
					vm.Kill()
					cancel()
					<-done
					t.Fatalf("%q (%d) never came on the console:\n%s", m.at, m.n, vm.Tail(30))
				}
				if !last {
					cp := filepath.Join(t.TempDir(), "cut.img")
					atCut := vmtest.CutCopy(t, vm, img, cp)
					dataPartitionClean(t, cp)
					gen := bootGen(t, cp)
					t.Logf("copied at the %s (%q): the card boots %s", m.name, m.at, genText(gen))
					want := m.want
					if next := p.moments[k+1]; len(atCut) >= from && strings.Count(atCut[from:], next.at) >= next.n {
						// A loaded host stopped the guest late: the push
						// client had gone on (a confirm comes at once).
						t.Logf("the cut meant for the %s came after the %s had begun: the card may boot what that leaves", m.name, next.name)
						want = next.want
					}
					switch {
					case want == "old" && gen != oldGen, want == "new" && gen == oldGen:
						t.Errorf("cut at the %s: the card boots %s, want the %s config (%s before the push)", m.name, genText(gen), want, genText(oldGen))
					}
					os.Remove(cp)
					continue
				}
				vm.Kill()
				cancel()
				<-done
				t.Logf("ocfw push (killed at the %s, %q):\n%s%s", m.name, m.at, out.String(), errs.String())
				dataPartitionClean(t, img)
				vm = vmtest.Start(top, img, vmtest.Options{Name: next, NICs: nics})
				got := strings.TrimSpace(b.wait(t, vm, "cat /proc/sys/kernel/hostname", 5*time.Minute))
				bootDone(t, vm)
				status, _ := b.run("ocf config status", nil)
				t.Logf("killed at the %s: boots %s; %s", m.name, got, strings.TrimSpace(status))
				switch {
				case got != hostname && got != next:
					t.Fatalf("boots %q: neither the old %s nor the new %s", got, hostname, next)
				case m.want == "old" && got != hostname, m.want == "new" && got != next:
					t.Errorf("boots %s, want the %s config", got, m.want)
				case strings.Contains(status, "is provisional"):
					t.Errorf("a provisional config after the boot: %s", status)
				}
				hostname = got
			}
		})
		if t.Failed() {
			return
		}
	}
}

// bootGen is the pushed config a boot of img would run (config.AtBoot on
// its store, as the boot reads it; nothing written): its generation, 0
// for the config from before any push.
func bootGen(t *testing.T, img string) int {
	t.Helper()
	c := vmtest.Store(t, img)
	g, _, err := config.AtBoot(readOnlyValues{&c.State})
	must(t, err)
	if g == nil {
		return 0
	}
	return g.N
}

func genText(n int) string {
	if n == 0 {
		return "the config from before any push"
	}
	return fmt.Sprintf("pushed config %d", n)
}

// readOnlyValues is a store read back on the host: AtBoot's write (a
// provisional config rolled back) goes nowhere.
type readOnlyValues struct{ s *store.State }

func (v readOnlyValues) Value(name string, x any) (bool, error) { return v.s.Value(name, x) }
func (v readOnlyValues) SetValue(string, any) error             { return nil }
