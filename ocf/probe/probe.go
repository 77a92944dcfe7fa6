// Package probe finds, on a running system, the engines a firmware's plan
// expects: Go software always, kernel implementations over AF_ALG bound by
// driver name, and /dev/crypto engines. What the plan names but the system
// lacks is reported absent, with the reason, rather than failed.
package probe

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/afalg"
	"github.com/ocfw/ocfw/ocf/cryptodev"
	"github.com/ocfw/ocfw/ocf/soft"
)

// Want is one engine the plan expects for one cipher.
type Want struct {
	Engine   string      `json:"engine"` // catalog id, e.g. "geode-aes"
	Instance int         `json:"instance"`
	Driver   string      `json:"driver"` // driver name, e.g. "cbc-aes-geode"
	API      catalog.API `json:"api"`
	Cipher   string      `json:"cipher"`
	Hardware bool        `json:"hardware"`
	// Absent, when set, is why the engine cannot be present (the plan
	// says so: a stand-in kernel without its driver); it is not looked for.
	Absent string `json:"absent,omitempty"`
}

// Target is a Want and what was found for it.
type Target struct {
	Want
	// Driver is the engine when present, nil when absent.
	Driver ocf.Driver
	// Name is the driver name actually found (kernel software names come
	// from /proc/crypto, not the catalog's guess).
	Name   string
	Reason string // why absent
	Module string
}

// Present reports whether the engine was found.
func (t *Target) Present() bool { return t.Driver != nil }

// Options say where to look; the zero value looks at the real system.
type Options struct {
	ProcCrypto string // default /proc/crypto
	Cryptodev  string // default /dev/crypto
	// Depth is the AF_ALG requests kept in flight per session for batches.
	Depth int
	// Extra engines (e.g. fault-injection test engines) added for every
	// cipher they support, as hardware.
	Extra []ocf.Driver
}

// Find resolves each want. The result has one Target per want, in order,
// plus one per (extra engine, cipher) after them.
func Find(wants []Want, opt Options) []Target {
	if opt.ProcCrypto == "" {
		opt.ProcCrypto = "/proc/crypto"
	}
	if opt.Cryptodev == "" {
		opt.Cryptodev = "/dev/crypto"
	}
	f := &finder{opt: opt, afalg: map[string]afalgResult{}}
	out := make([]Target, 0, len(wants))
	for _, w := range wants {
		out = append(out, f.find(w))
	}
	for _, d := range opt.Extra {
		caps := d.Caps()
		names := make([]string, 0, len(caps.Ciphers))
		for c := range caps.Ciphers {
			names = append(names, c)
		}
		sort.Slice(names, func(i, j int) bool { return cipherIndex(names[i]) < cipherIndex(names[j]) })
		for _, c := range names {
			if wanted(wants, c) {
				out = append(out, Target{Want: Want{Engine: "test", Driver: d.Name(), API: catalog.APIGo, Cipher: c, Hardware: d.Hardware()}, Driver: d, Name: d.Name()})
			}
		}
	}
	return out
}

func wanted(wants []Want, cipher string) bool {
	if len(wants) == 0 {
		return true
	}
	for _, w := range wants {
		if w.Cipher == cipher {
			return true
		}
	}
	return false
}

func cipherIndex(name string) int {
	for i, n := range catalog.CipherNames() {
		if n == name {
			return i
		}
	}
	return 1 << 20
}

type afalgResult struct {
	d   *afalg.Driver
	err error
}

type finder struct {
	opt       Options
	mu        sync.Mutex
	afalg     map[string]afalgResult
	cdev      *cryptodev.Driver
	cdevErr   error
	cdevTried bool
}

func (f *finder) find(w Want) Target {
	t := Target{Want: w, Name: w.Driver}
	c, ok := catalog.LookupCipher(w.Cipher)
	if !ok {
		t.Reason = fmt.Sprintf("unknown cipher %q", w.Cipher)
		return t
	}
	if w.Absent != "" {
		t.Reason = w.Absent
		return t
	}
	switch w.API {
	case catalog.APIGo:
		t.Driver, t.Name = soft.New(), soft.Name
	case catalog.APIAFALG:
		if err := afalg.Available(); err != nil {
			t.Reason = "no AF_ALG in this kernel: " + err.Error()
			return t
		}
		name := w.Driver
		if w.Engine == catalog.KernelSoft {
			n, err := f.kernelSoftware(c)
			if err != nil {
				t.Reason = err.Error()
				return t
			}
			name = n
		}
		d, err := f.bind(name)
		if err != nil {
			t.Reason = absentReason(w, err)
			return t
		}
		if !d.Caps().Supports(c.Name, c.KeySize) && c.Kind != catalog.KindMAC {
			t.Reason = fmt.Sprintf("%s is loaded but does not serve %s with %d-bit keys", name, c.Name, c.KeyBits())
			return t
		}
		t.Driver, t.Name = d, name
		if e, ok := d.Entry(); ok {
			t.Module = e.Module
		}
	case catalog.APICryptodev:
		d, err := f.cryptodev()
		if err != nil {
			t.Reason = fmt.Sprintf("%s: %v (the %s engine needs an OCF kernel with /dev/crypto)", f.opt.Cryptodev, err, w.Engine)
			return t
		}
		for _, e := range d.Engines() {
			if e.Cipher == c.Name && (e.Driver == "" || e.Driver == w.Driver) {
				t.Driver = d
				return t
			}
		}
		t.Reason = fmt.Sprintf("%s does not offer %s through %s", w.Driver, c.Name, f.opt.Cryptodev)
	default:
		t.Reason = fmt.Sprintf("unknown API %q", w.API)
	}
	return t
}

func absentReason(w Want, err error) string {
	msg := err.Error()
	if e, ok := catalog.LookupEngine(w.Engine); ok && e.Hardware {
		var ids []string
		for _, id := range e.Match.PCI {
			ids = append(ids, fmt.Sprintf("%04x:%04x", id.Vendor, id.Device))
		}
		if len(ids) > 0 && !pciPresent(e.Match.PCI) {
			return fmt.Sprintf("no %s device (PCI %s) on this system", e.Description, strings.Join(ids, ", "))
		}
	}
	return msg
}

// bind makes (once per driver name) an AF_ALG driver pinned to name.
func (f *finder) bind(name string) (*afalg.Driver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.afalg[name]; ok {
		return r.d, r.err
	}
	d, err := afalg.New(afalg.Options{Driver: name, Depth: f.opt.Depth, ProcCrypto: f.opt.ProcCrypto})
	f.afalg[name] = afalgResult{d, err}
	return d, err
}

// kernelSoftware finds the kernel's best software implementation of c:
// a generic bind first (which makes the kernel load the modules for it),
// then the highest-priority entry in /proc/crypto that no hardware engine
// module provides.
func (f *finder) kernelSoftware(c *catalog.Cipher) (string, error) {
	generic, err := afalg.New(afalg.Options{ProcCrypto: f.opt.ProcCrypto})
	if err == nil {
		key := make([]byte, c.KeySize)
		if s, err := generic.Open(c, key); err == nil {
			s.Close()
		}
	}
	entries, err := afalg.ReadProcCrypto(f.opt.ProcCrypto)
	if err != nil {
		return "", err
	}
	best, bestPrio := "", -1
	for _, e := range afalg.Implementations(entries, c.KernelType, c.Kernel) {
		if hardwareModule(e.Module) || e.Internal {
			continue
		}
		if e.Priority > bestPrio {
			best, bestPrio = e.Driver, e.Priority
		}
	}
	if best == "" {
		return "", fmt.Errorf("the kernel has no software %s (%s); is its module built?", c.Kernel, c.Name)
	}
	return best, nil
}

func hardwareModule(m string) bool {
	for _, e := range catalog.Engines() {
		if e.Hardware && e.Module == m {
			return true
		}
	}
	return false
}

func (f *finder) cryptodev() (*cryptodev.Driver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cdevTried {
		f.cdevTried = true
		f.cdev, f.cdevErr = cryptodev.Open(f.opt.Cryptodev, cryptodev.Auto)
	}
	return f.cdev, f.cdevErr
}

// pciPresent reports whether any of ids is on the PCI bus (sysfs).
func pciPresent(ids []catalog.PCIID) bool {
	devs, err := os.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		return false
	}
	for _, d := range devs {
		v, _ := os.ReadFile("/sys/bus/pci/devices/" + d.Name() + "/vendor")
		dv, _ := os.ReadFile("/sys/bus/pci/devices/" + d.Name() + "/device")
		for _, id := range ids {
			if strings.TrimSpace(string(v)) == fmt.Sprintf("0x%04x", id.Vendor) && strings.TrimSpace(string(dv)) == fmt.Sprintf("0x%04x", id.Device) {
				return true
			}
		}
	}
	return false
}
