package qemu

import "strings"

// oopsMarkers begin a guest kernel's fatal report: a page fault or
// general protection fault, a BUG, an oops, a panic. A WARNING is not
// one: Debian's 686 kernel prints one at every boot with QEMU's
// virtio-crypto device (the kernel's self-test of virtio-crypto-rsa
// fails: QEMU's builtin backend refuses raw RSA), and the boot goes on.
var oopsMarkers = []string{
	"BUG: ",
	"kernel BUG at ",
	"Oops: ",
	"general protection fault",
	"invalid opcode: ",
	"Kernel panic - not syncing",
}

// OopsLines bounds KernelOops: a report with its stale "?" frames runs
// to about 130 lines; the frames that name the cause are at its top.
const OopsLines = 200

// KernelOops returns the guest kernel's first fatal report in console,
// from its first line (BUG:, Oops:, Kernel panic...) on, at most
// OopsLines lines, without carriage returns; "" when there is none.
// A console's tail alone loses the report's top, where the fault and
// the frames that caused it are.
func KernelOops(console string) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(console, "\r", ""), "\n"), "\n")
	for i, l := range lines {
		for _, m := range oopsMarkers {
			if strings.Contains(l, m) {
				end := min(len(lines), i+OopsLines)
				return strings.Join(lines[i:end], "\n")
			}
		}
	}
	return ""
}

// FailureText is what a failure message shows of a console: the
// kernel's fatal report when there is one (KernelOops), else the last n
// lines.
func FailureText(console string, n int) string {
	if oops := KernelOops(console); oops != "" {
		return "the guest kernel's report:\n" + oops
	}
	return TailLines(console, n)
}
