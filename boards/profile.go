// Package boards holds the board and card profiles ocfw knows (YAML,
// embedded), loads user-written ones with errors that name file, line and
// column, and resolves a board plus its cards into a Plan: what a firmware
// for that hardware contains and how it boots.
package boards

// Kinds of profile. Every profile file says which it is.
const (
	KindBoard = "board"
	KindCard  = "card"
)

// Boot methods.
const (
	BootBIOSCF  = "bios-cf" // legacy BIOS booting a CompactFlash card (MBR, SYSLINUX)
	BootRedBoot = "redboot" // RedBoot loading kernel and ramdisk from FIS flash partitions
)

// Slot form factors.
const (
	FormPCI     = "pci"
	FormMiniPCI = "minipci"
)

// CPU architectures profiles may declare; each maps to one Go target.
const (
	ArchI586    = "i586"    // Geode LX: MMX and CMOV, no SSE2
	ArchARMv5TE = "armv5te" // XScale IXP4xx
)

// Board is a board profile as written in YAML.
type Board struct {
	Kind        string   `yaml:"kind" json:"-"`
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description" json:"description"`
	Vendor      string   `yaml:"vendor" json:"vendor"`
	Aliases     []string `yaml:"aliases" json:"aliases,omitempty"`
	CPU         CPU      `yaml:"cpu" json:"cpu"`
	RAMMB       int      `yaml:"ram_mb" json:"ram_mb"`
	Storage     Storage  `yaml:"storage" json:"storage"`
	Console     Console  `yaml:"console" json:"console"`
	Boot        string   `yaml:"boot" json:"boot"`
	Slots       []Slot   `yaml:"slots" json:"slots"`
	// Engine is the ID of an on-chip crypto engine from the drivers
	// catalog, if the SoC has one.
	Engine string      `yaml:"engine" json:"engine,omitempty"`
	Kernel KernelSpec  `yaml:"kernel" json:"kernel"`
	Image  ImageLayout `yaml:"image" json:"image"`

	src source
}

// CPU describes the processor.
type CPU struct {
	Model  string `yaml:"model" json:"model"`
	MHz    int    `yaml:"mhz" json:"mhz"`
	Arch   string `yaml:"arch" json:"arch"`
	Endian string `yaml:"endian" json:"endian"`
}

// Storage is where the firmware lives.
type Storage struct {
	// Kind is "cf" (a CompactFlash card the BIOS boots) or "flash"
	// (on-board NOR flash, written through RedBoot).
	Kind    string `yaml:"kind" json:"kind"`
	CardMB  int    `yaml:"card_mb" json:"card_mb,omitempty"`   // cf: the card size images are made for by default
	FlashMB int    `yaml:"flash_mb" json:"flash_mb,omitempty"` // flash: total size
	// CF is true when a flash board also has a CompactFlash slot for data.
	CF bool `yaml:"cf" json:"cf,omitempty"`
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

// KernelSpec says which kernel the board expects.
type KernelSpec struct {
	// Source is "debian" (a Debian kernel package fetched with apt-get) or
	// "user" (the user supplies the kernel with --kernel).
	Source  string `yaml:"source" json:"source"`
	Package string `yaml:"package" json:"package,omitempty"`
	Arch    string `yaml:"arch" json:"arch,omitempty"`       // Debian architecture of the package
	Image   string `yaml:"image" json:"image"`               // bzImage or zImage
	Note    string `yaml:"note" json:"note,omitempty"`       // what a user must know
	Cmdline string `yaml:"cmdline" json:"cmdline,omitempty"` // extra kernel arguments
}

// ImageLayout is the shape of the image ocfw builds for the board.
type ImageLayout struct {
	// bios-cf: whole image size, boot partition size, data label.
	SizeMB    int    `yaml:"size_mb" json:"size_mb,omitempty"`
	BootMB    int    `yaml:"boot_mb" json:"boot_mb,omitempty"`
	DataLabel string `yaml:"data_label" json:"data_label,omitempty"`
	// Compression of the initramfs: xz, gzip or none.
	Compression string `yaml:"compression" json:"compression"`
	// InitramfsBudgetKB bounds the compressed initramfs (0: no bound
	// beyond the image or partition size).
	InitramfsBudgetKB int `yaml:"initramfs_budget_kb" json:"initramfs_budget_kb,omitempty"`
	// Flash partitions (redboot), in flash order.
	Flash []FlashPart `yaml:"flash" json:"flash,omitempty"`
}

// FlashPart is one RedBoot FIS partition.
type FlashPart struct {
	Name   string `yaml:"name" json:"name"`
	Offset int    `yaml:"offset" json:"offset"`
	Size   int    `yaml:"size" json:"size"`
}

// Card is an expansion card profile.
type Card struct {
	Kind        string `yaml:"kind" json:"-"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description"`
	Vendor      string `yaml:"vendor" json:"vendor"`
	Form        string `yaml:"form" json:"form"`
	Chip        string `yaml:"chip" json:"chip"`
	// PCI is the card's vendor:device id, as lspci -n prints it.
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
