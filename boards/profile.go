// Package boards holds the board and card profiles ocfw knows (YAML,
// embedded), loads user-written ones with errors that name file, line and
// column, and resolves a board plus its cards into a Plan: what a firmware
// for that hardware contains and how it boots.
package boards

import "github.com/ocfw/ocfw/plan"

// Kinds of profile. Every profile file says which it is.
const (
	KindBoard = "board"
	KindCard  = "card"
)

// Slot form factors.
const (
	FormPCI     = "pci"
	FormMiniPCI = "minipci"
	// FormQEMU is a stand-in for a card that exists only in QEMU runs
	// (the virtio-crypto device, the test engine): it takes no slot, and
	// any x86 board accepts it.
	FormQEMU = "qemu"
)

// CPU architectures profiles may declare; each maps to one Go target.
const (
	ArchI586    = "i586"    // Geode LX: MMX and CMOV, no SSE2
	ArchARMv5TE = "armv5te" // XScale IXP4xx
)

// Board is a board profile as written in YAML.
type Board struct {
	Kind        string       `yaml:"kind" json:"-"`
	Name        string       `yaml:"name" json:"name"`
	Description string       `yaml:"description" json:"description"`
	Vendor      string       `yaml:"vendor" json:"vendor"`
	Aliases     []string     `yaml:"aliases" json:"aliases"`
	CPU         CPU          `yaml:"cpu" json:"cpu"`
	RAMMB       int          `yaml:"ram_mb" json:"ram_mb"`
	Storage     plan.Storage `yaml:"storage" json:"storage"`
	Console     Console      `yaml:"console" json:"console"`
	Boot        string       `yaml:"boot" json:"boot"`
	Slots       []Slot       `yaml:"slots" json:"slots"`
	// Engine is the ID of an on-chip crypto engine from the drivers
	// catalog, if the SoC has one.
	Engine string `yaml:"engine" json:"engine,omitempty"`
	// Watchdog is the board's hardware watchdog driver from the drivers
	// catalog (catalog.LookupWatchdog), if it has one: an upgrade's trial
	// boot keeps it petted, so a hang resets into the old system.
	Watchdog string `yaml:"watchdog" json:"watchdog,omitempty"`
	// Ports are the Ethernet ports, in the order the kernel names their
	// interfaces; their roles are the defaults a site config starts from.
	Ports  []plan.Port      `yaml:"ports" json:"ports"`
	Kernel plan.Kernel      `yaml:"kernel" json:"kernel"`
	Image  plan.ImageLayout `yaml:"image" json:"image"`

	src source
}

// CPU describes the processor.
type CPU struct {
	Model  string `yaml:"model" json:"model"`
	MHz    int    `yaml:"mhz" json:"mhz"`
	Arch   string `yaml:"arch" json:"arch"`
	Endian string `yaml:"endian" json:"endian"`
	// Features are the CPU's instruction-set features that decide which
	// kernels run on it (FeaturesX86, FeaturesARM): a Debian 686 kernel
	// stops at boot on a CPU without cmov.
	Features []string `yaml:"features" json:"features"`
}

// CPU features a profile may list, by architecture, with the names
// /proc/cpuinfo uses.
var (
	FeaturesX86 = []string{"fpu", "tsc", "cx8", "mmx", "mmxext", "cmov", "3dnow", "3dnowext", "sse", "sse2", "pae", "nopl"}
	FeaturesARM = []string{"armv5te", "edsp", "xscale", "iwmmxt"}
)

// kernelNeeds lists, for Debian kernel packages, the CPU features the
// kernel refuses to boot without ("requires the following features not
// present on the CPU"); the i586 boards' packages need cmov, the PAE
// flavour pae too.
var kernelNeeds = map[string][]string{
	"linux-image-686":     {"cmov"},
	"linux-image-686-pae": {"cmov", "pae"},
}

// Console is the serial console the boot loader and kernel use.
type Console struct {
	Device string `yaml:"device" json:"device"`
	Baud   int    `yaml:"baud" json:"baud"`
}

// Slot is a group of expansion slots of one form factor.
type Slot struct {
	Form  string `yaml:"form" json:"form"`
	Count int    `yaml:"count" json:"count"`
}

// Card is an expansion card profile.
type Card struct {
	Kind        string `yaml:"kind" json:"-"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description"`
	Vendor      string `yaml:"vendor" json:"vendor"`
	Form        string `yaml:"form" json:"form"`
	Chip        string `yaml:"chip" json:"chip"`
	// PCI is the card's vendor:device id, as lspci -n prints it; empty
	// only for a stand-in whose engine has no device (the test engine).
	PCI    string `yaml:"pci" json:"pci"`
	Engine string `yaml:"engine" json:"engine"`

	src source
}

// source remembers where a profile came from, for error messages.
type source struct {
	file string
	pos  positions
}

// File is the path (or embedded name) the profile was read from.
func (b *Board) File() string { return b.src.file }

// File is the path (or embedded name) the profile was read from.
func (c *Card) File() string { return c.src.file }

// emptyLists makes lists the profile left out empty rather than nil, so
// that JSON shows them as [] like every other list.
func (b *Board) emptyLists() {
	if b.Aliases == nil {
		b.Aliases = []string{}
	}
	if b.Slots == nil {
		b.Slots = []Slot{}
	}
	if b.CPU.Features == nil {
		b.CPU.Features = []string{}
	}
}
