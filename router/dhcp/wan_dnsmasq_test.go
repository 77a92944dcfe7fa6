package dhcp

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/router/netns"
)

// TestWANClientWithDnsmasq runs the WAN client against dnsmasq as the
// WAN's server, on this host: dnsmasq in one network namespace, the
// client in-process in another, joined by a veth pair. The client gets a
// lease and puts the address on its interface, renews at T1, and once
// dnsmasq is gone drops the address at expiry, not an exchange later.
//
// dnsmasq gives no lease shorter than 2 minutes, so the run takes that
// long after the renewal: it is skipped under -short, where
// TestClientDropsAtExpiry checks the same schedule on a fake clock.
// T1 and T2 are set to 10 and 20 s so that the unanswered exchanges
// after the server's death end near expiry (the case that was 14 s
// late).
func TestWANClientWithDnsmasq(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("runs on the host, with the host's dnsmasq")
	}
	if testing.Short() {
		t.Skip("takes 2+ minutes (dnsmasq's shortest lease); TestClientDropsAtExpiry is the short version")
	}
	dnsmasq, err := exec.LookPath("dnsmasq")
	if err != nil {
		labtest.SkipOrFail(t, "dnsmasq not installed (Debian package dnsmasq-base)")
		return
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		labtest.SkipOrFail(t, "nsenter not installed (Debian package util-linux)")
		return
	}
	if os.Geteuid() != 0 {
		labtest.SkipOrFail(t, "needs root for network namespaces")
		return
	}
	srvNS, err := netns.New("wan-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srvNS.Close() })
	cliNS, err := netns.New("wan-client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cliNS.Close() })
	if err := netns.Veth(srvNS, "wsrv", "198.51.100.1/24", cliNS, "wcli", ""); err != nil {
		labtest.SkipOrFail(t, "no veth pair: %v", err)
		return
	}

	dir := t.TempDir()
	var out bytes.Buffer
	cmd := inNetNS(t, srvNS, dnsmasq, "--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface=wsrv", "--bind-interfaces", "--log-dhcp", "--log-facility=-",
		"--dhcp-range=198.51.100.50,198.51.100.60,2m",
		"--dhcp-option=option:router,198.51.100.1", "--dhcp-option=option:dns-server,198.51.100.1",
		"--dhcp-option=option:T1,10", "--dhcp-option=option:T2,20",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		t.Logf("dnsmasq:\n%s", out.String())
	})

	type event struct {
		at   time.Time
		next *WANLease
	}
	var mu sync.Mutex
	var events []event
	var addrErrs []error
	link, err := cliNS.Netlink().LinkByName("wcli")
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(ClientConfig{Interface: "wcli", Hostname: "gw",
		Log: func(f string, a ...any) { t.Logf("client: "+f, a...) },
		Update: func(prev, next *WANLease) {
			// As the router does: the address goes on and off the link.
			var err error
			switch {
			case next != nil:
				err = cliNS.AddAddr("wcli", next.Address.String())
			case prev != nil:
				a, _ := netlink.ParseAddr(prev.Address.String())
				err = cliNS.Netlink().AddrDel(link, a)
			}
			mu.Lock()
			defer mu.Unlock()
			events = append(events, event{time.Now(), next})
			if err != nil {
				addrErrs = append(addrErrs, err)
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	// Run opens its packet socket in the client's namespace.
	go func() { cliNS.Do(func() error { return c.Run(ctx) }); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })

	waitFor := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		end := time.Now().Add(d)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("no %s within %v", what, d)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("lease", 30*time.Second, func() bool { return c.Lease() != nil })
	first := c.Lease()
	if first.LeaseTime != 2*time.Minute || first.T1 != 10*time.Second || first.T2 != 20*time.Second ||
		first.Router.String() != "198.51.100.1" || !first.Server.IsValid() {
		t.Fatalf("lease %v: T1 %v T2 %v, want dnsmasq's 2m lease with T1 10s, T2 20s", first, first.T1, first.T2)
	}
	if !hasAddr(t, cliNS, "wcli", first.Address.String()) {
		t.Fatalf("%s is not on wcli", first.Address)
	}

	// Renewed at T1: a newer lease, same address, no update (nothing the
	// router configures changed).
	waitFor("renewal", first.T1+20*time.Second, func() bool { return c.Lease().Acquired.After(first.Acquired) })
	renewed := c.Lease()
	if d := renewed.Acquired.Sub(first.Acquired); d < first.T1 || d > first.T1+3*time.Second {
		t.Errorf("renewed %v after the lease, want at T1 (%v)", d, first.T1)
	}
	if renewed.Address != first.Address {
		t.Errorf("renewal gave %v, want %v", renewed.Address, first.Address)
	}

	// The server goes; the client tries at T1, rebinds from T2, and the
	// address must go at expiry.
	cmd.Process.Kill()
	<-exited
	expiry := renewed.Expires()
	waitFor("loss of the lease", time.Until(expiry)+30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return events[len(events)-1].next == nil
	})
	mu.Lock()
	last := events[len(events)-1]
	errs := addrErrs
	mu.Unlock()
	if last.next != nil {
		t.Fatalf("last update %v, want the loss", last.next)
	}
	if late := last.at.Sub(expiry); late < 0 || late > time.Second {
		t.Errorf("address dropped %v after expiry, want within a second", late)
	}
	if hasAddr(t, cliNS, "wcli", first.Address.String()) {
		t.Errorf("%s still on wcli after the lease expired", first.Address)
	}
	if len(errs) != 0 {
		t.Errorf("setting addresses: %v", errs)
	}
}

// inNetNS is a command run in ns by nsenter, which enters the namespace
// through the descriptor the child inherits as fd 3.
func inNetNS(t *testing.T, ns *netns.NS, name string, args ...string) *exec.Cmd {
	t.Helper()
	fd, err := unix.Dup(ns.FD())
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "netns "+ns.Name)
	t.Cleanup(func() { f.Close() })
	cmd := exec.Command("nsenter", append([]string{"--net=/proc/self/fd/3", "--", name}, args...)...)
	cmd.ExtraFiles = []*os.File{f}
	return cmd
}

func hasAddr(t *testing.T, ns *netns.NS, ifname, prefix string) bool {
	t.Helper()
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	as, err := ns.Netlink().AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.IPNet.String() == prefix {
			return true
		}
	}
	return false
}
