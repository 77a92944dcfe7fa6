package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/realclient"
)

// adminNIC is the router's second LAN port on QEMU's restricted user
// network, on the LAN's subnet, with 127.0.0.1:port forwarded to the
// router's SSH: how an admin on this host reaches it, as `ocfw run`
// does. Plugged in only after the LAN client has its lease, so that
// QEMU's own DHCP server never answers it.
func adminNIC(port int) qemu.NIC {
	return qemu.NIC{MAC: routerLAN2, RestrictedUser: true, UserNet: "192.168.1.0/24", UserHost: "192.168.1.254",
		Forwards: []qemu.Forward{{Proto: "tcp", HostPort: port, GuestAddr: "192.168.1.1", GuestPort: 22}}}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// adminOverSSH is what an admin does with OpenSSH's ssh from this host
// on the running router (the boot after the LAN client got its lease):
// the ocf views, the usual commands, the shell's line editing, and a
// clean reboot, after which the guest is gone (QEMU runs with
// -no-reboot).
func adminOverSSH(t *testing.T, vm *qemu.VM, port int, privPEM []byte) {
	client := realclient.Need(t, "ssh")
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	must(t, os.WriteFile(key, privPEM, 0o600))
	opts := realclient.OpenSSHArgs(key, filepath.Join(dir, "known_hosts"), port)
	run := func(t *testing.T, command string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
		defer cancel()
		cmd := exec.CommandContext(ctx, client, append(append([]string(nil), opts...), "root@127.0.0.1", command)...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("ssh %q: %v\nstdout: %s\nstderr: %s", command, err, out.String(), errb.String())
		}
		return out.String()
	}
	// The router's SSH answers once the boot sequence reached it.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := exec.CommandContext(ctx, client, append(append([]string(nil), opts...), "root@127.0.0.1", "true")...).Run()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh -p %d root@127.0.0.1 (the LAN port on QEMU's user network): %v\n%s", port, err, vm.Tail(30))
		}
	}

	t.Run("ocf log", func(t *testing.T) {
		// The first boot's lines, kept on the card.
		if out := run(t, "ocf log"); !strings.Contains(out, "lease 192.168.1.100 to 52:54:00:0b:00:02") {
			t.Errorf("ocf log lacks the first boot's lease:\n%s", out)
		}
		if out := run(t, "ocf log -n 3"); strings.Count(out, "\n") != 3 {
			t.Errorf("ocf log -n 3 printed:\n%s", out)
		}
	})
	t.Run("ocf clients", func(t *testing.T) {
		out := run(t, "ocf clients")
		if !regexp.MustCompile(`(?m)^192\.168\.1\.100\s+52:54:00:0b:00:02\s+\S+\s+until `).MatchString(out) {
			t.Errorf("ocf clients lacks the LAN client's lease:\n%s", out)
		}
	})
	t.Run("ocf firewall", func(t *testing.T) {
		out := run(t, "ocf firewall")
		// The input rule that lets the LAN manage the router accepted
		// these SSH connections (from QEMU's end, 192.168.1.254).
		m := regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+iifname "[^"]+" meta nfproto ipv4 ip saddr 192\.168\.1\.0/24 accept`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("ocf firewall has no LAN management rule:\n%s", out)
		}
		if p, _ := strconv.Atoi(m[1]); p == 0 {
			t.Errorf("the rule that accepted SSH counted no packets:\n%s", out)
		}
		if !strings.Contains(out, "chain input (hook input, policy drop)") {
			t.Errorf("ocf firewall lacks the input chain:\n%s", out)
		}
	})
	t.Run("commands", func(t *testing.T) {
		for _, c := range []struct{ cmd, want string }{
			{"df", "Mounted on"},
			{"free", "Mem:"},
			{"ocf net | grep 'SSH host key'", "SSH host key SHA256:"},
			{"head -n 1 /proc/meminfo; cat /proc/meminfo | tail -n 2 | head -n 1", "MemTotal:"},
			{"ps", "PID"},
			{"head -1 /proc/meminfo", "MemTotal:"}, // the shell's head -N
			{"uname -s", "Linux"},
			// ocf boot has the kernel log processes a signal kills.
			{"cat /proc/sys/kernel/print-fatal-signals", "1"},
			// The router's own address: the raw socket reads the request
			// too, which stopped u-root's ping ("got seq 1; want 2").
			{"ping -c 2 -i 0.2 -W 5 192.168.1.1", "2 packets transmitted, 2 received"},
		} {
			if out := run(t, c.cmd); !strings.Contains(out, c.want) {
				t.Errorf("%s: %q lacks %q", c.cmd, out, c.want)
			}
		}
		if f := strings.Fields(run(t, "hostname; uname -n")); len(f) != 2 || f[0] != f[1] {
			t.Errorf("hostname and uname -n: %q, want the same name twice", f)
		}
	})
	// A command started over SSH ends when its client goes: the board's
	// sshd is started by ocf boot, which ignores SIGHUP while it gives up
	// the console, and its sessions inherited that (44c66ff): a ping
	// (the board has no sleep) kept running after OpenSSH was killed.
	t.Run("client gone hangs up", func(t *testing.T) {
		pinging := func() bool {
			for _, l := range strings.Split(run(t, "ps"), "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] == "ping" {
					return true
				}
			}
			return false
		}
		if pinging() {
			t.Fatal("a ping is running before the test's")
		}
		cmd := exec.Command(client, append(append([]string(nil), opts...), "root@127.0.0.1", "ping -c 987 -i 1 192.168.1.1")...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started := false
		for end := time.Now().Add(time.Minute); !started && time.Now().Before(end); time.Sleep(time.Second) {
			started = pinging()
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !started {
			t.Fatal("the ping started over ssh never showed in ps")
		}
		gone := false
		for end := time.Now().Add(30 * time.Second); !gone && time.Now().Before(end); time.Sleep(time.Second) {
			gone = !pinging()
		}
		if !gone {
			t.Error("the ping started over ssh still runs 30 s after its OpenSSH client was killed: no hang-up")
		}
	})
	t.Run("line editing", func(t *testing.T) {
		tm := realclient.StartTerminal(t, []string{"TERM=xterm", "SSH_AUTH_SOCK="},
			append(append([]string{client}, opts...), "-tt", "root@127.0.0.1")...)
		wait := func(re string, n int) bool { return tm.WaitFor(regexp.MustCompile(re), n, 2*time.Minute) }
		if !wait(`# $`, 1) {
			t.Fatal("no prompt")
		}
		tm.Send("echo =abc\r")
		if !wait(`\n=abc\r\n`, 1) {
			t.Fatal("echo =abc did not run")
		}
		tm.Send("\x1b[A\r") // up: the line again
		if !wait(`\n=abc\r\n`, 2) {
			t.Fatal("up-arrow and enter did not run echo =abc again")
		}
		tm.Send("echo =xz\x1b[D\x1b[Dy\x01\x05!\r") // left twice, insert, ^A, ^E, append
		if !wait(`\n=yxz!\r\n`, 1) {
			t.Error("left, insert, ^A and ^E did not edit the line")
		}
		tm.Send("exit\r")
		if err := tm.Wait(time.Minute); err != nil {
			t.Errorf("ssh after exit: %v", err)
		}
	})
	t.Run("reboot", func(t *testing.T) {
		// Over SSH exec, as an admin would; the connection goes down
		// with the router, so ssh's own status does not matter.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		exec.CommandContext(ctx, client, append(append([]string(nil), opts...), "root@127.0.0.1", "reboot")...).Run()
		done := make(chan error, 1)
		go func() { done <- vm.Wait() }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("the guest did not restart after reboot:\n%s", vm.Tail(30))
		}
	})
	vm.Kill()
}
