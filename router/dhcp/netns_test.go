package dhcp

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// onLockedThread runs f on a locked OS thread and puts the thread back in
// the network namespace it started in. If that fails the thread stays
// locked, and Go ends it with the goroutine rather than reuse it.
func onLockedThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("back to the original netns: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// newNetNS creates a network namespace and returns an fd to it (only in
// the kerneltest guest: the host's namespaces are never touched).
func newNetNS(t *testing.T) int {
	t.Helper()
	var fd int
	err := onLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		var err error
		fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// vethToNetNS creates a veth pair in the calling namespace, keeps here
// (with address hereAddr, up) and moves there into the namespace nsFD,
// up and without an address.
func vethToNetNS(t *testing.T, here, hereAddr, there string, nsFD int) {
	t.Helper()
	// The ROUTE family only: netlink's default handle also opens a
	// netfilter socket, which fails without nfnetlink.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: here}, PeerName: there}); err != nil {
		t.Fatalf("veth %s-%s: %v", here, there, err)
	}
	peer, err := h.LinkByName(there)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetNsFd(peer, nsFD); err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName(here)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr(hereAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(l, addr); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	err = inNetNS(nsFD, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer h.Close()
		for _, name := range []string{"lo", there} {
			l, err := h.LinkByName(name)
			if err != nil {
				return err
			}
			if err := h.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// inNetNS runs f inside the namespace nsFD; sockets it opens stay there.
func inNetNS(nsFD int, f func() error) error {
	return onLockedThread(func() error {
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		return f()
	})
}
