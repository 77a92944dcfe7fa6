// Package plan is the contract between the host that builds a firmware and
// the board that runs it: the Plan (what the firmware holds and how it
// boots), the files the host writes into the image and where the board
// reads them, the console markers runners wait for, and one reader for
// each file. Both sides import it, so it imports neither YAML nor cobra
// nor anything host-only: only the drivers catalog.
package plan

import (
	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/jsonfile"
)

// Boot methods.
const (
	BootBIOSCF  = "bios-cf" // legacy BIOS booting a CompactFlash card (MBR, SYSLINUX)
	BootRedBoot = "redboot" // RedBoot loading kernel and ramdisk from FIS flash partitions
	// BootQEMUARM is a QEMU ARM machine booting the kernel, device tree
	// and initramfs given on its command line, with an SD card image
	// holding only the data partition: the stand-in for IXP4xx boards.
	BootQEMUARM = "qemu-arm"
)

// Kernel sources.
const (
	KernelDebian = "debian" // a Debian kernel package fetched with apt-get
	KernelUser   = "user"   // the user supplies the kernel with --kernel
)

// Version is the version of the Plan's JSON layout. A plan written
// before the field existed has none and reads as version 1.
const Version = 1

// Plan is everything a firmware for one board and its cards contains and
// how it boots. The host resolves it from profiles (package boards) and
// writes it into the initramfs as File; the board reads it with Read.
type Plan struct {
	Version     int         `json:"version"`
	Board       string      `json:"board"`
	Description string      `json:"description"`
	Cards       []Card      `json:"cards"`
	Go          GoTarget    `json:"go"`
	Console     Console     `json:"console"`
	Boot        string      `json:"boot"`
	Image       ImageLayout `json:"image"`
	Storage     Storage     `json:"storage"`
	RAMMB       int         `json:"ram_mb"`
	Kernel      Kernel      `json:"kernel"`
	Ports       []Port      `json:"ports,omitempty"`
	Modules     []Module    `json:"modules"`
	Engines     []Engine    `json:"engines"`
	Ciphers     []Cipher    `json:"ciphers"`
	RequireHW   []string    `json:"require_hw,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
	// StandIn is set when the firmware is built for a QEMU machine
	// standing in for the board (which QEMU cannot emulate), not for the
	// board itself.
	StandIn *StandIn `json:"stand_in,omitempty"`
}

// StandIn is the QEMU machine and kernel a plan was built for in place of
// its board, and what booting there does not prove about the board.
type StandIn struct {
	Name     string `json:"name"`
	Machine  string `json:"machine"`   // QEMU -M
	MemoryMB int    `json:"memory_mb"` // the machine's RAM, not the board's
	DTB      string `json:"dtb"`       // device tree file from the kernel package
	Cmdline  string `json:"cmdline"`   // the whole kernel command line
	// Limits are what a boot on the stand-in does not prove about the
	// board, one sentence each.
	Limits []string `json:"limits"`
}

// Card is a card placed in a slot.
type Card struct {
	Name   string `json:"name"`
	Slot   string `json:"slot"` // e.g. "minipci0"
	Engine string `json:"engine"`
	Chip   string `json:"chip"`
	PCI    string `json:"pci"`
}

// GoTarget is how the firmware's Go userland is compiled for the board.
type GoTarget struct {
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	GOARM  string `json:"goarm,omitempty"`
	GO386  string `json:"go386,omitempty"`
}

// Env returns the target as environment assignments for `go build`.
func (g GoTarget) Env() []string {
	env := []string{"GOOS=" + g.GOOS, "GOARCH=" + g.GOARCH, "CGO_ENABLED=0"}
	if g.GOARM != "" {
		env = append(env, "GOARM="+g.GOARM)
	}
	if g.GO386 != "" {
		env = append(env, "GO386="+g.GO386)
	}
	return env
}

// Console is the serial console with the kernel argument that uses it.
type Console struct {
	Device    string `json:"device"`
	Baud      int    `json:"baud"`
	KernelArg string `json:"kernel_arg"`
}

// Storage is where the firmware lives. Board profiles carry the same
// fields, hence the YAML names.
type Storage struct {
	// Kind is "cf" (a CompactFlash card the BIOS boots) or "flash"
	// (on-board NOR flash, written through RedBoot).
	Kind    string `yaml:"kind" json:"kind"`
	CardMB  int    `yaml:"card_mb" json:"card_mb,omitempty"`   // cf: the card size images are made for by default
	FlashMB int    `yaml:"flash_mb" json:"flash_mb,omitempty"` // flash: total size
	// CF is true when a flash board also has a CompactFlash slot for data.
	CF bool `yaml:"cf" json:"cf,omitempty"`
}

// Kernel says which kernel the board expects.
type Kernel struct {
	// Source is KernelDebian or KernelUser.
	Source  string `yaml:"source" json:"source"`
	Package string `yaml:"package" json:"package,omitempty"`
	Arch    string `yaml:"arch" json:"arch,omitempty"`       // Debian architecture of the package
	Image   string `yaml:"image" json:"image"`               // bzImage or zImage
	Note    string `yaml:"note" json:"note,omitempty"`       // what a user must know
	Cmdline string `yaml:"cmdline" json:"cmdline,omitempty"` // extra kernel arguments
	// DTB is the device tree a device-tree kernel for the board carries
	// appended to its image (RedBoot passes none); BoardFile the config
	// option of the board file that older kernels have instead.
	DTB       string `yaml:"dtb" json:"dtb,omitempty"`
	BoardFile string `yaml:"board_file" json:"board_file,omitempty"`
}

// ImageLayout is the shape of the image ocfw builds for the board.
type ImageLayout struct {
	// bios-cf: whole image size, boot partition size, data label
	// (DataLabel when the profile names none).
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

// Module is a kernel module the firmware loads at boot, in load order.
type Module struct {
	Name string `json:"name"`
	For  string `json:"for"`
	// OutOfTree modules are not in any distribution kernel (OCF).
	OutOfTree bool `json:"out_of_tree,omitempty"`
	// Optional modules improve on what the kernel has without them (a
	// better software AES); a kernel that lacks one is not refused, and
	// the boot says it is not there.
	Optional bool `json:"optional,omitempty"`
	// IfDevice modules drive a device the machine may not have (the
	// Geode's watchdog under QEMU, QEMU's watchdog on the board): a load
	// that finds no device is not a problem.
	IfDevice bool `json:"if_device,omitempty"`
}

// Engine is one engine instance the firmware will look for.
type Engine struct {
	ID       string      `json:"id"`
	Instance int         `json:"instance"`
	From     string      `json:"from"` // "on-chip", "card vpn1411 in minipci0", "software"
	Hardware bool        `json:"hardware"`
	API      catalog.API `json:"api"`
	Module   string      `json:"module,omitempty"`
	Async    bool        `json:"async"`
	Mainline bool        `json:"mainline"`
	Requires string      `json:"requires,omitempty"`
	Quirks   []string    `json:"quirks,omitempty"`
	// Absent, when set, says why the engine cannot be present in this
	// build (a stand-in kernel without its driver): the firmware reports
	// it absent with this reason instead of looking for it.
	Absent string `json:"absent,omitempty"`
}

// Cipher lists the engines that can serve one cipher, best first, ending
// with software.
type Cipher struct {
	Cipher  string  `json:"cipher"`
	KeyBits int     `json:"key_bits,omitempty"`
	Routes  []Route `json:"engines"`
}

// Route is one engine's offer for a cipher.
type Route struct {
	Engine   string      `json:"engine"`
	Instance int         `json:"instance"`
	Driver   string      `json:"driver"`
	API      catalog.API `json:"api"`
	Priority int         `json:"priority"`
	// Hardware is true when this engine does this cipher, at this key
	// size, in hardware.
	Hardware  bool   `json:"hardware"`
	HWKeyBits []int  `json:"hw_key_bits,omitempty"`
	Note      string `json:"note,omitempty"`
}

// JSON renders the plan as indented JSON with a trailing newline: the
// bytes the host writes into the initramfs.
func (p *Plan) JSON() ([]byte, error) { return jsonfile.Indent(p) }

// DataPartitionLabel is the FAT label of the partition that keeps the
// board's files.
func (p *Plan) DataPartitionLabel() string {
	if p != nil && p.Image.DataLabel != "" {
		return p.Image.DataLabel
	}
	return DataLabel
}

// Port is one Ethernet port of a board, as its profile lists it.
type Port struct {
	// Name is what the user calls it: "wan", "lan1"...
	Name string `yaml:"name" json:"name"`
	// Driver is the kernel module that drives it (via-rhine, ixp4xx_eth).
	Driver string `yaml:"driver" json:"driver"`
	// PCI is vendor:device for a PCI NIC; Platform names an on-chip one.
	PCI      string `yaml:"pci" json:"pci,omitempty"`
	Platform string `yaml:"platform" json:"platform,omitempty"`
	// Interface is the kernel interface it becomes (eth0...).
	Interface string `yaml:"interface" json:"interface"`
	// Role is the default use: wan, lan or unused.
	Role string `yaml:"role" json:"role"`
	// Needs is what the driver needs beyond itself (NPE microcode).
	Needs string `yaml:"needs" json:"needs,omitempty"`
}

// Port roles.
const (
	RoleWAN    = "wan"
	RoleLAN    = "lan"
	RoleUnused = "unused"
)
