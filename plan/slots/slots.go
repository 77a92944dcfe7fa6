// Package slots is the contract between the image build and the board
// for the two system slots of a bios-cf card: where each slot's kernel
// and initramfs are on the boot partition, how large the build makes
// them, the fixed-size syslinux.cfg whose DEFAULT line names the
// committed slot, and how a system's revision is named. The build
// (firmware) writes this layout; the board's upgrade (boot/upgrade)
// writes inside it, in place.
package slots

import (
	"crypto/sha256"
	"fmt"
	"strings"
)

// The slots and the files of each, on the boot partition.
const (
	SlotA = "a"
	SlotB = "b"
	// SyslinuxCfg is SYSLINUX's configuration, CfgSize bytes, whose
	// DEFAULT line names the committed slot.
	SyslinuxCfg = "/boot/syslinux/syslinux.cfg"
	// LDLinux is the loader whose last two sectors are the ADV.
	LDLinux = "/boot/syslinux/ldlinux.sys"
	// CfgSize is syslinux.cfg's fixed size: it is rewritten in place.
	CfgSize = 2048
	// CmdlineArg names the slot on the kernel command line of each label.
	CmdlineArg = "ocfw.slot"
)

// Slots lists the slots in order.
var Slots = []string{SlotA, SlotB}

// Kernel and Initrd are the slot's files.
func Kernel(slot string) string { return "/" + slot + "/vmlinuz" }

// Initrd is the slot's initramfs file.
func Initrd(slot string) string { return "/" + slot + "/initrd" }

// Other is the slot that is not slot.
func Other(slot string) string {
	if slot == SlotA {
		return SlotB
	}
	return SlotA
}

// ValidSlot says whether s names a slot.
func ValidSlot(s string) bool { return s == SlotA || s == SlotB }

// Revision names a system by its contents: the first 12 hex digits of
// the sha256 of its kernel's and initramfs's sha256s, so two builds of
// the same inputs have the same revision and any change gives another.
func Revision(kernelSHA, initrdSHA string) string {
	h := sha256.Sum256([]byte(kernelSHA + "\n" + initrdSHA + "\n"))
	return fmt.Sprintf("%x", h[:6])
}

// SlotSizes is how large the build makes each slot's files: the kernel
// half again as large as this one (at least 8 MiB), the initramfs twice
// as large (at least 8 MiB), rounded up to MiB. Debian's 686 kernel is
// 5.6 MiB and the full initramfs 2-5 MiB: later systems grow by much
// less than that between upgrades.
func SlotSizes(kernel, initrd int64) (int64, int64) {
	const mib = 1 << 20
	up := func(n int64) int64 { return max(8*mib, (n+mib-1)/mib*mib) }
	return up(kernel * 3 / 2), up(initrd * 2)
}

// Config is the fixed-size syslinux.cfg: one label per slot, each
// booting its slot's files with the slot on the kernel command line,
// def the default. head is a comment line (no newline); cmdline the
// kernel arguments both labels share.
func Config(head, def, cmdline string) (string, error) {
	if !ValidSlot(def) {
		return "", fmt.Errorf("default slot %q: want a or b", def)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\nDEFAULT %s\nPROMPT 0\nTIMEOUT 10\n", head, def)
	for _, s := range Slots {
		fmt.Fprintf(&b, "LABEL %s\n  LINUX %s\n  INITRD %s\n  APPEND %s %s=%s\n", s, Kernel(s), Initrd(s), cmdline, CmdlineArg, s)
	}
	const pad = "# padding: ocfw rewrites this file in place, keep its size\n"
	if b.Len()+len(pad)+1 > CfgSize {
		return "", fmt.Errorf("syslinux.cfg needs %d bytes, more than its fixed %d", b.Len()+len(pad)+1, CfgSize)
	}
	b.WriteString(strings.TrimSuffix(pad, "\n"))
	b.WriteString(strings.Repeat(" ", CfgSize-b.Len()-1))
	b.WriteString("\n")
	return b.String(), nil
}

// Default returns the slot the DEFAULT line of cfg names.
func Default(cfg []byte) (string, error) {
	i, err := defaultAt(cfg)
	if err != nil {
		return "", err
	}
	return string(cfg[i]), nil
}

// SetDefault returns cfg with its DEFAULT line naming slot, the same
// length, every other byte unchanged.
func SetDefault(cfg []byte, slot string) ([]byte, error) {
	if !ValidSlot(slot) {
		return nil, fmt.Errorf("slot %q: want a or b", slot)
	}
	i, err := defaultAt(cfg)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), cfg...)
	out[i] = slot[0]
	return out, nil
}

// defaultAt is the index of the slot letter of the DEFAULT line.
func defaultAt(cfg []byte) (int, error) {
	s := string(cfg)
	i := strings.Index(s, "\nDEFAULT ")
	if i < 0 {
		return 0, fmt.Errorf("%s has no DEFAULT line", SyslinuxCfg)
	}
	i += len("\nDEFAULT ")
	if i+1 >= len(s) || s[i+1] != '\n' || !ValidSlot(s[i:i+1]) {
		return 0, fmt.Errorf("%s: DEFAULT names no slot (a or b)", SyslinuxCfg)
	}
	return i, nil
}

// BootedSlot reads the slot from the kernel command line, "" if none.
func BootedSlot(cmdline string) string {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, CmdlineArg+"="); ok && ValidSlot(v) {
			return v
		}
	}
	return ""
}
