// Package testengine holds the stand-in crypto engines that tests in QEMU
// meet where a board would have a Geode AES or a Hifn card:
//
//   - QEMU's virtio-crypto PCI device, driven by Linux's own virtio_crypto
//     (catalog engine catalog.VirtioCrypto). VirtioCryptoModules are the
//     modules a guest loads for it; the device's QEMU options are in the
//     catalog entry (catalog.Engine.QEMU).
//   - ocfw_testaes, a small out-of-tree kernel module (source in module/)
//     that registers an asynchronous cbc(aes) skcipher, driver
//     "ocfw_testaes_cbc", at priority 300: correct AES-CBC with the
//     kernel's AES library after a per-request delay, corrupting output on
//     demand (catalog engine catalog.TestAES). Build compiles it for the
//     cached Debian kernel from that kernel's own headers.
//
// Neither goes into a user's image unless the plan names it.
package testengine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// The test module's names, as the catalog has them.
const (
	Module   = catalog.TestAESModule   // ocfw_testaes
	Driver   = catalog.TestAESDriver   // ocfw_testaes_cbc
	Priority = catalog.TestAESPriority // its cbc(aes) priority unless loaded with priority=N
)

// The test module's parameters. Delay and Corrupt can be changed at any
// time through SetParam; Prio only at load.
const (
	// ParamDelay is the delay before each request, in microseconds: a
	// card's setup cost. Requests are done one at a time, so it bounds
	// throughput as well as latency.
	ParamDelay = "delay_us"
	// ParamCorrupt makes the module corrupt every request of at least
	// that many bytes (one flipped bit in the first block); 0 never.
	ParamCorrupt = "corrupt_min"
	// ParamPriority is the cbc(aes) priority, read at load.
	ParamPriority = "priority"
)

// VirtioCryptoModules are the modules a Debian 686 guest loads for QEMU's
// virtio-crypto device: the PCI bus driver, which modules.dep does not
// name, then the crypto driver. With their modules.dep dependencies the
// load order is virtio_ring, virtio, virtio_pci_modern_dev,
// virtio_pci_legacy_dev, virtio_pci, crypto_engine, virtio_crypto.
var VirtioCryptoModules = []string{"virtio_pci", "virtio_crypto"}

// ParamDir is where the loaded test module's parameters are.
const ParamDir = "/sys/module/" + Module + "/parameters"

// SetParam sets a parameter of the loaded test module (inside the guest).
func SetParam(name string, value int) error {
	if err := os.WriteFile(filepath.Join(ParamDir, name), []byte(strconv.Itoa(value)), 0); err != nil {
		return fmt.Errorf("testengine: setting %s=%d: %w", name, value, err)
	}
	return nil
}

// Param reads a parameter of the loaded test module.
func Param(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(ParamDir, name))
	if err != nil {
		return 0, fmt.Errorf("testengine: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
