// Package drivers is the catalog of crypto engines ocfw knows: which kernel
// module drives each, how the hardware is matched, which driver name it
// registers per cipher, at what priority, with which key sizes done in
// hardware, and through which API the firmware reaches it. It holds facts,
// not crypto; package ocf/probe finds the engines present on a running
// system, and the boot sequence's DetectPCI lists the PCI ones.
package catalog

import (
	"encoding/json"
	"fmt"
)

// API is how the firmware reaches an engine.
type API string

const (
	APIAFALG     API = "af_alg"    // Linux kernel crypto API over AF_ALG sockets
	APICryptodev API = "cryptodev" // OCF-style /dev/crypto (out-of-tree driver)
	APIGo        API = "go"        // Go standard library, in process
)

// Bus says how an engine's hardware is found.
type Bus string

const (
	BusPCI      Bus = "pci"
	BusPlatform Bus = "platform"
	BusNone     Bus = "none" // software
	// BusModule is an engine that is only a loaded kernel module, with
	// no device to find: the test engine.
	BusModule Bus = "module"
)

// PCIID is a PCI vendor:device pair as lspci prints it. In JSON it is
// {"pci": "13a3:0020", "chip": ...}, the form profiles and plans use.
type PCIID struct {
	Vendor uint16 `json:"-"`
	Device uint16 `json:"-"`
	Chip   string `json:"chip"`
}

// String is the id as lspci -n prints it: "13a3:0020".
func (id PCIID) String() string { return fmt.Sprintf("%04x:%04x", id.Vendor, id.Device) }

type pciJSON struct {
	PCI  string `json:"pci"`
	Chip string `json:"chip"`
}

// MarshalJSON writes the id as "vvvv:dddd".
func (id PCIID) MarshalJSON() ([]byte, error) {
	return json.Marshal(pciJSON{PCI: id.String(), Chip: id.Chip})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (id *PCIID) UnmarshalJSON(b []byte) error {
	var j pciJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var v, d uint16
	if n, err := fmt.Sscanf(j.PCI, "%04x:%04x", &v, &d); n != 2 || err != nil || len(j.PCI) != 9 {
		return fmt.Errorf("pci %s: want vendor:device in hex, e.g. \"13a3:0020\"", Quote(j.PCI))
	}
	*id = PCIID{Vendor: v, Device: d, Chip: j.Chip}
	return nil
}

// Match is how an engine is detected on a running system.
type Match struct {
	Bus      Bus     `json:"bus"`
	PCI      []PCIID `json:"pci"`
	Platform string  `json:"platform,omitempty"` // platform device or SoC family
}

// CipherSupport is one cipher an engine serves.
type CipherSupport struct {
	Cipher string `json:"cipher"`
	// Driver is the name the engine registers with the kernel crypto API
	// (bindable over AF_ALG) or reports over /dev/crypto. "%d" stands for
	// the engine instance (hifn0, hifn1, ...).
	Driver   string `json:"driver"`
	Priority int    `json:"priority"`
	// HWKeyBits lists the key sizes the engine does in hardware for this
	// cipher's algorithm; when the cipher's own key size is not among them
	// the driver runs it in a software fallback. Empty for software
	// engines and for hardware MACs (any key length).
	HWKeyBits []int  `json:"hw_key_bits,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Engine is one crypto engine in the catalog.
type Engine struct {
	ID          string          `json:"id"`
	Description string          `json:"description"`
	Hardware    bool            `json:"hardware"`
	Module      string          `json:"module,omitempty"` // kernel module; empty when built in or not a kernel driver
	Match       Match           `json:"match"`
	API         API             `json:"api"`
	Async       bool            `json:"async"`
	Mainline    bool            `json:"mainline"` // driver in mainline Linux
	Requires    string          `json:"requires,omitempty"`
	Ciphers     []CipherSupport `json:"ciphers"`
	Quirks      []string        `json:"quirks"`
	// LoadFirst are modules to load before Module that its modules.dep
	// entry does not name: the bus driver that finds the device.
	LoadFirst []string `json:"load_first,omitempty"`
	// QEMU are the emulator options that create the engine's device, for
	// an engine that exists only in QEMU (a stand-in for a card in tests
	// and ocfw run); empty for real hardware.
	QEMU []string `json:"qemu,omitempty"`
	// TestOnly marks ocfw's own test engine: a module built for tests,
	// in no user's image unless a plan names it.
	TestOnly bool `json:"test_only,omitempty"`
}

// Emulated reports whether the engine exists only in QEMU.
func (e *Engine) Emulated() bool { return len(e.QEMU) > 0 }

// StandIn reports whether the engine stands in for hardware in tests
// (emulated by QEMU, or the test module) rather than being a real one.
func (e *Engine) StandIn() bool { return e.Emulated() || e.TestOnly }

// Serves returns the engine's support entry for a cipher.
func (e *Engine) Serves(cipher string) (CipherSupport, bool) {
	for _, c := range e.Ciphers {
		if c.Cipher == cipher {
			return c, true
		}
	}
	return CipherSupport{}, false
}

// Engine IDs of the catalog.
const (
	GeodeAES   = "geode-aes"
	Hifn795x   = "hifn-795x"
	IXP4xx     = "ixp4xx"
	SafeNet    = "safenet"
	KernelSoft = "kernel-soft"
	GoSoft     = "go-soft"
	// The stand-ins for hardware in QEMU.
	VirtioCrypto = "virtio-crypto"
	TestAES      = "testaes"
)

// Facts about the stand-ins that tests and the test module share.
const (
	// VirtioCryptoAESDriver is the cbc(aes) driver virtio_crypto registers.
	VirtioCryptoAESDriver = "virtio_crypto_aes_cbc"
	// TestAESModule is the test engine's module and TestAESDriver the
	// cbc(aes) driver it registers, at TestAESPriority by default.
	TestAESModule   = "ocfw_testaes"
	TestAESDriver   = "ocfw_testaes_cbc"
	TestAESPriority = 300
)

// DevCryptoModule is cryptodev-linux's module, /dev/crypto for the
// kernel's crypto API (the cryptodev-linux dialect), which ocfw build
// compiles for x86 images with a hardware engine (package kbuild).
const DevCryptoModule = "cryptodev"

var aesBits = []int{128, 192, 256}

var engines = []Engine{
	{
		ID:          GeodeAES,
		Description: "AMD Geode LX on-chip AES engine",
		Hardware:    true,
		Module:      "geode_aes",
		Match:       Match{Bus: BusPCI, PCI: []PCIID{{Vendor: 0x1022, Device: 0x2082, Chip: "Geode LX AES"}}},
		API:         APIAFALG,
		Mainline:    true,
		Ciphers: []CipherSupport{
			{Cipher: "aes-128-cbc", Driver: "cbc-aes-geode", Priority: 400, HWKeyBits: []int{128}},
			{Cipher: "aes-192-cbc", Driver: "cbc-aes-geode", Priority: 400, HWKeyBits: []int{128}, Note: "192-bit keys go to the driver's software fallback"},
			{Cipher: "aes-256-cbc", Driver: "cbc-aes-geode", Priority: 400, HWKeyBits: []int{128}, Note: "256-bit keys go to the driver's software fallback"},
		},
		Quirks: []string{
			"hardware does 128-bit AES keys only; 192/256-bit keys run in a kernel software fallback",
			"its priority (400) makes it the kernel's choice for cbc(aes): bind by driver name to reach another engine",
		},
	},
	{
		ID:          Hifn795x,
		Description: "Hifn 7955/7956 crypto processor",
		Hardware:    true,
		Module:      "hifn_795x",
		Match: Match{Bus: BusPCI, PCI: []PCIID{
			{Vendor: 0x13a3, Device: 0x0020, Chip: "Hifn 7955"},
			{Vendor: 0x13a3, Device: 0x001d, Chip: "Hifn 7956"},
		}},
		API:      APIAFALG,
		Async:    true,
		Mainline: true,
		Ciphers: []CipherSupport{
			{Cipher: "des-cbc", Driver: "cbc-des-hifn%d", Priority: 300, HWKeyBits: []int{64}},
			{Cipher: "des-ede3-cbc", Driver: "cbc-3des-hifn%d", Priority: 300, HWKeyBits: []int{192}},
			{Cipher: "aes-128-cbc", Driver: "cbc-aes-hifn%d", Priority: 300, HWKeyBits: aesBits},
			{Cipher: "aes-192-cbc", Driver: "cbc-aes-hifn%d", Priority: 300, HWKeyBits: aesBits},
			{Cipher: "aes-256-cbc", Driver: "cbc-aes-hifn%d", Priority: 300, HWKeyBits: aesBits},
		},
		Quirks: []string{
			"the mainline driver registers no hashes: HMACs stay in software",
			"the Hifn 7751 is not supported by the mainline driver",
			"asynchronous: keep several requests in flight to hide per-request setup cost",
		},
	},
	{
		ID:          IXP4xx,
		Description: "Intel IXP4xx NPE-C crypto engine",
		Hardware:    true,
		Module:      "ixp4xx_crypto",
		Match:       Match{Bus: BusPlatform, Platform: "ixp4xx_crypto"},
		API:         APIAFALG,
		Async:       true,
		Mainline:    true,
		Requires:    "NPE-C microcode (firmware file NPE-C) on the root filesystem and a little-endian IXP4xx kernel",
		Ciphers: []CipherSupport{
			{Cipher: "des-cbc", Driver: "cbc(des)-ixp4xx", Priority: 300, HWKeyBits: []int{64}},
			{Cipher: "des-ede3-cbc", Driver: "cbc(des3_ede)-ixp4xx", Priority: 300, HWKeyBits: []int{192}},
			{Cipher: "aes-128-cbc", Driver: "cbc(aes)-ixp4xx", Priority: 300, HWKeyBits: aesBits},
			{Cipher: "aes-192-cbc", Driver: "cbc(aes)-ixp4xx", Priority: 300, HWKeyBits: aesBits},
			{Cipher: "aes-256-cbc", Driver: "cbc(aes)-ixp4xx", Priority: 300, HWKeyBits: aesBits},
		},
		Quirks: []string{
			"HMACs exist only combined with a cipher (authenc(hmac(sha1),cbc(aes))-ixp4xx): no standalone hmac",
			"historic IXP4xx systems ran big-endian; the Go userland needs a little-endian kernel",
			"the driver reads the SoC's feature fuses and registers nothing on parts without crypto: the engine is then reported absent",
		},
	},
	{
		ID:          SafeNet,
		Description: "SafeNet 1141 security processor",
		Hardware:    true,
		Module:      "safe",
		Match:       Match{Bus: BusPCI, PCI: []PCIID{{Vendor: 0x16ae, Device: 0x1141, Chip: "SafeNet 1141"}}},
		API:         APICryptodev,
		Mainline:    false,
		Requires:    "a kernel patched with OCF-Linux and its out-of-tree safe driver, exposing /dev/crypto (BSD/OCF dialect); there is no mainline Linux driver",
		Ciphers: []CipherSupport{
			{Cipher: "des-cbc", Driver: "safe%d", HWKeyBits: []int{64}},
			{Cipher: "des-ede3-cbc", Driver: "safe%d", HWKeyBits: []int{192}},
			{Cipher: "aes-128-cbc", Driver: "safe%d", HWKeyBits: aesBits},
			{Cipher: "aes-192-cbc", Driver: "safe%d", HWKeyBits: aesBits},
			{Cipher: "aes-256-cbc", Driver: "safe%d", HWKeyBits: aesBits},
			{Cipher: "hmac-md5", Driver: "safe%d"},
			{Cipher: "hmac-sha1", Driver: "safe%d"},
		},
		Quirks: []string{
			"on a big-endian IXP425 the OCF safe driver produced wrong results (see shared reference results): trust it only after the cross-check",
		},
	},
	{
		ID:          VirtioCrypto,
		Description: "QEMU virtio-crypto PCI device (a stand-in for a crypto card, in QEMU only)",
		Hardware:    true,
		Module:      "virtio_crypto",
		LoadFirst:   []string{"virtio_pci"},
		Match:       Match{Bus: BusPCI, PCI: []PCIID{{Vendor: 0x1af4, Device: 0x1054, Chip: "virtio-crypto"}}},
		API:         APIAFALG,
		Async:       true,
		Mainline:    true,
		QEMU:        []string{"-object", "cryptodev-backend-builtin,id=ocfwcrypto0", "-device", "virtio-crypto-pci,cryptodev=ocfwcrypto0"},
		Ciphers: []CipherSupport{
			{Cipher: "aes-128-cbc", Driver: VirtioCryptoAESDriver, Priority: 150, HWKeyBits: aesBits},
			{Cipher: "aes-192-cbc", Driver: VirtioCryptoAESDriver, Priority: 150, HWKeyBits: aesBits},
			{Cipher: "aes-256-cbc", Driver: VirtioCryptoAESDriver, Priority: 150, HWKeyBits: aesBits},
		},
		Quirks: []string{
			"exists only in QEMU: ocfw run and ocfw try attach the device when the plan has this engine; on a real board it is reported absent",
			"QEMU's builtin backend does the AES on the host's CPU: its speed says nothing about a real card",
			"its bus driver virtio_pci is loaded first (modules.dep names only virtio, virtio_ring and crypto_engine)",
		},
	},
	{
		ID:          TestAES,
		Description: "ocfw's test engine: module ocfw_testaes, AES-CBC after a set delay, corrupting on demand (tests only)",
		Hardware:    true,
		Module:      TestAESModule,
		Match:       Match{Bus: BusModule},
		API:         APIAFALG,
		Async:       true,
		TestOnly:    true,
		Requires:    "the ocfw_testaes module built for the image's kernel, which ocfw build compiles from the board's Debian kernel headers (make, gcc-12); it is in no kernel package",
		Ciphers: []CipherSupport{
			{Cipher: "aes-128-cbc", Driver: TestAESDriver, Priority: TestAESPriority, HWKeyBits: aesBits},
			{Cipher: "aes-192-cbc", Driver: TestAESDriver, Priority: TestAESPriority, HWKeyBits: aesBits},
			{Cipher: "aes-256-cbc", Driver: TestAESDriver, Priority: TestAESPriority, HWKeyBits: aesBits},
		},
		Quirks: []string{
			"test only: a kernel module that does AES in software on the CPU, standing in for a card",
			"parameters under /sys/module/ocfw_testaes/parameters: delay_us (a card's per-request setup cost), corrupt_min (corrupt every request of at least that many bytes; 0 never)",
			"requests are done one at a time, in order, so the delay limits throughput as a card's setup cost would",
		},
	},
	{
		ID:          KernelSoft,
		Description: "Linux kernel software crypto (generic C/asm implementations)",
		Match:       Match{Bus: BusNone},
		API:         APIAFALG,
		Mainline:    true,
		Ciphers: []CipherSupport{
			{Cipher: "des-cbc", Driver: "cbc(des-generic)", Priority: 100},
			{Cipher: "des-ede3-cbc", Driver: "cbc(des3_ede-generic)", Priority: 100},
			{Cipher: "aes-128-cbc", Driver: "cbc(aes-generic)", Priority: 100},
			{Cipher: "aes-192-cbc", Driver: "cbc(aes-generic)", Priority: 100},
			{Cipher: "aes-256-cbc", Driver: "cbc(aes-generic)", Priority: 100},
			{Cipher: "hmac-md5", Driver: "hmac(md5-generic)", Priority: 100},
			{Cipher: "hmac-sha1", Driver: "hmac(sha1-generic)", Priority: 100},
			{Cipher: "hmac-sha256", Driver: "hmac(sha256-generic)", Priority: 100},
			{Cipher: "null", Driver: "ecb-cipher_null", Priority: 100},
		},
		Quirks: []string{
			"driver names vary by kernel build (e.g. an assembler AES); the firmware reads the real ones from /proc/crypto",
			"each request crosses the kernel framework: slower than Go software at every size, kept to cross-check hardware",
		},
	},
	{
		ID:          GoSoft,
		Description: "Go standard library crypto in the firmware's own process",
		Match:       Match{Bus: BusNone},
		API:         APIGo,
		Ciphers:     goCiphers(),
		Quirks:      []string{"the reference every engine is cross-checked against, and the fallback for every request"},
	},
}

func goCiphers() []CipherSupport {
	out := make([]CipherSupport, 0, len(ciphers))
	for _, c := range ciphers {
		out = append(out, CipherSupport{Cipher: c.Name, Driver: "go"})
	}
	return out
}

// Engines returns the catalog: hardware engines first, then the
// stand-ins, then software.
func Engines() []Engine { return append([]Engine(nil), engines...) }

// EngineIDs returns the catalog's engine IDs.
func EngineIDs() []string {
	ids := make([]string, len(engines))
	for i := range engines {
		ids[i] = engines[i].ID
	}
	return ids
}

// LookupEngine finds an engine by ID.
func LookupEngine(id string) (*Engine, bool) {
	for i := range engines {
		if engines[i].ID == id {
			e := engines[i]
			return &e, true
		}
	}
	return nil, false
}
