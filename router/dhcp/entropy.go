package dhcp

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"
)

// The dhcpv4 package draws a transaction ID for every message it builds,
// replies included, from u-root's rand, which spins on getrandom with
// GRND_NONBLOCK until the kernel's random generator is seeded (for up to
// two minutes per message). Early after boot on a board without a
// hardware RNG driver loaded, or in QEMU, it is not: the guest test saw
// a CPU spinning and no DHCP at all. One blocking getrandom instead makes
// Linux 5.4 and later seed it from CPU timing jitter within about a
// second, after which the non-blocking calls succeed at once.
var (
	entropyOnce  sync.Once
	entropyReady = make(chan struct{})
)

// waitEntropy returns once the kernel's random generator is seeded, or
// when ctx ends.
func waitEntropy(ctx context.Context) error {
	entropyOnce.Do(func() {
		go func() {
			defer close(entropyReady)
			var b [1]byte
			for {
				// ENOSYS (before Linux 3.17) is fine too: u-root then
				// reads /dev/urandom.
				if _, err := unix.Getrandom(b[:], 0); err != unix.EINTR {
					return
				}
			}
		}()
	})
	select {
	case <-entropyReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
