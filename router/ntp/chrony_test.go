package ntp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
)

// chronyd finds the real chrony, or skips (fails in CI).
func chronyd(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chronyd")
	if err != nil {
		labtest.SkipOrFail(t, "chronyd not installed (Debian package chrony)")
	}
	if os.Geteuid() != 0 {
		// chronyd wants root to start even with -x; -u root keeps it so.
		labtest.SkipOrFail(t, "chronyd needs root")
	}
	return p
}

// freeUDPPort is a port nothing listens on at 127.0.0.1 just now.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// startChronyd runs chronyd as an NTP server on 127.0.0.1 with its
// config, pid and drift files in a temp dir, never touching this host's
// clock (-x); local makes it serve its own clock at stratum 8, without
// it chronyd has no reference and says it is not synchronised.
func startChronyd(t *testing.T, local bool) string {
	bin := chronyd(t)
	dir := t.TempDir()
	port := freeUDPPort(t)
	conf := fmt.Sprintf("port %d\nbindaddress 127.0.0.1\nallow 127.0.0.1\ncmdport 0\npidfile %s\ndriftfile %s\n",
		port, filepath.Join(dir, "pid"), filepath.Join(dir, "drift"))
	if local {
		conf += "local stratum 8\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "chrony.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-d", "-x", "-u", "root", "-f", filepath.Join(dir, "chrony.conf"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("chronyd:\n%s", out.String())
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Serving once it answers at all (an unsynchronised answer counts).
	for end := time.Now().Add(10 * time.Second); ; {
		_, err := Query(context.Background(), addr, 200*time.Millisecond, nil)
		if err == nil || strings.Contains(err.Error(), "not synchronised") {
			return addr
		}
		if time.Now().After(end) {
			t.Fatalf("chronyd does not answer on %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSyncFromChrony: the router's client takes its time from a real
// chronyd (stratum 8) and hands the LAN's server what it needs.
func TestSyncFromChrony(t *testing.T) {
	addr := startChronyd(t, true)
	var set time.Time
	var synced *Result
	before := time.Now()
	res, err := SyncOnce(context.Background(), Config{Servers: []string{addr}, Timeout: 2 * time.Second,
		Set:    func(t time.Time) error { set = t; return nil }, // never this host's clock
		Synced: func(r Result) { synced = &r }})
	if err != nil {
		t.Fatal(err)
	}
	// chronyd serves this host's clock: the time set is the host's, give
	// or take the exchange.
	if d := set.Sub(before); d < -time.Second || d > 2*time.Second {
		t.Errorf("clock set to %v, want about %v", set, before)
	}
	if synced == nil || synced.Stratum != 8 || synced.Addr != netip.MustParseAddr("127.0.0.1") || res.Server != addr {
		t.Errorf("synced %+v, want stratum 8 from 127.0.0.1", synced)
	}
}

// TestRefuseUnsynchronisedChrony: a chronyd with no reference answers
// "leap indicator 3, stratum 0": the clock is not set, and the error says
// the server is not synchronised, not that it sent a kiss-o'-death.
func TestRefuseUnsynchronisedChrony(t *testing.T) {
	addr := startChronyd(t, false)
	setCalled := false
	_, err := SyncOnce(context.Background(), Config{Servers: []string{addr}, Timeout: 2 * time.Second,
		Set: func(time.Time) error { setCalled = true; return nil }})
	if err == nil || setCalled {
		t.Fatalf("SyncOnce: %v (clock set: %v); want a refusal", err, setCalled)
	}
	if msg := err.Error(); !strings.Contains(msg, "not synchronised (leap indicator 3, stratum 0, no reference)") || strings.Contains(msg, "kiss") {
		t.Errorf("error %q; want it to say the server is not synchronised", msg)
	}
}

// chronyQuery runs chronyd -Q (measure once, set nothing) against
// 127.0.0.1:port and returns its output.
func chronyQuery(t *testing.T, port int) (string, error) {
	bin := chronyd(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-Q", "-t", "4", "-u", "root",
		fmt.Sprintf("server 127.0.0.1 port %d iburst maxsamples 1", port),
		"pidfile "+filepath.Join(dir, "pid")).CombinedOutput()
	return string(out), err
}

// TestServerWithChrony: chronyd as the LAN's client of the router's SNTP
// server. Unsynchronised, the router is refused; synchronised, chronyd
// measures the clock from it.
func TestServerWithChrony(t *testing.T) {
	chronyd(t)
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	s := NewServer(ServerConfig{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, c) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	out, err := chronyQuery(t, port)
	// It answers, "not synchronised"; chronyd takes no time from it and
	// gives up at its timeout.
	if err == nil || strings.Contains(out, "System clock wrong by") {
		t.Errorf("chronyd -Q against an unsynchronised router: %v\n%s\nwant no measurement", err, out)
	}
	s.Synced(Result{Time: time.Now(), Addr: netip.MustParseAddr("192.0.2.123"), Stratum: 2, RootDelay: 20 * time.Millisecond})
	out, err = chronyQuery(t, port)
	if err != nil || !strings.Contains(out, "System clock wrong by") {
		t.Errorf("chronyd -Q against a synchronised router: %v\n%s\nwant a measurement", err, out)
	}
}
