package qemu

import (
	"regexp"
	"strings"

	"github.com/ocfw/ocfw/plan"
)

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
	"Unable to handle kernel ",
	panicMarker,
}

// panicMarker begins the kernel's panic line. A panic that an oops
// caused ("Fatal exception", "Fatal exception in interrupt") comes after
// the oops's report.
const panicMarker = "Kernel panic - not syncing"

// dieHeader is the header of every report the kernel's die() prints,
// "<trap>: <error code> [#<oops count>]", whatever the trap:
// "Oops: 0002 [#1] PREEMPT SMP" (x86 page fault), "divide error: 0000
// [#1] PREEMPT SMP", "stack segment: 0000 [#1]", "Internal error: Oops:
// 17 [#1] ARM". The register dump and the call trace follow it, and an
// oops in an interrupt, or in a softirq-disabled section such as a
// crypto completion, ends in "Kernel panic - not syncing: Fatal
// exception in interrupt". A list of trap names misses some: a divide
// error's report was skipped that way and only its panic line shown.
var dieHeader = regexp.MustCompile(`: [0-9a-f]+ \[#[0-9]+\]`)

// OopsLines bounds KernelOops: a report with its stale "?" frames runs
// to about 130 lines; the frames that name the cause are at its top.
const OopsLines = 200

// PanicContext is how many console lines before a panic line
// FailureText shows when no report begins before it: whatever the
// kernel printed of the panic's cause in a form no marker knows.
const PanicContext = 40

// KernelOops returns the guest kernel's first fatal report in console,
// from its first line (BUG:, Oops:, a die() header such as "divide
// error: 0000 [#1]", Kernel panic...) on, at most OopsLines lines,
// without carriage returns; "" when there is none. A console's tail
// alone loses the report's top, where the fault and the frames that
// caused it are.
func KernelOops(console string) string {
	lines := consoleLines(console)
	i := oopsStart(lines)
	if i < 0 {
		return ""
	}
	return strings.Join(lines[i:min(len(lines), i+OopsLines)], "\n")
}

func consoleLines(console string) []string {
	return strings.Split(strings.TrimRight(strings.ReplaceAll(console, "\r", ""), "\n"), "\n")
}

// oopsStart is the index of the first line of lines that begins a
// fatal report, or -1.
func oopsStart(lines []string) int {
	for i, l := range lines {
		if dieHeader.MatchString(l) {
			return i
		}
		for _, m := range oopsMarkers {
			if strings.Contains(l, m) {
				return i
			}
		}
	}
	return -1
}

// FailureText is what a failure message shows of a console: the
// kernel's fatal report when there is one (KernelOops), else the last n
// lines. A report that begins at the panic line itself comes with the
// PanicContext console lines before it, so that a cause printed in a
// form KernelOops does not know still shows.
func FailureText(console string, n int) string {
	lines := consoleLines(console)
	i := oopsStart(lines)
	if i < 0 {
		return TailLines(console, n)
	}
	if strings.Contains(lines[i], plan.MarkDaemonDied) {
		// Not the kernel's: the firmware's word that its daemon died
		// ("BUG: " matches it). What killed it, a Go panic's trace or
		// nothing at all, is before it; the kernel's last lines after.
		return "the console before the firmware's daemon died:\n" + strings.Join(lines[max(0, i-PanicContext):i], "\n") +
			"\nthe firmware's report of it:\n" + strings.Join(lines[i:min(len(lines), i+OopsLines)], "\n")
	}
	text := "the guest kernel's report:\n" + strings.Join(lines[i:min(len(lines), i+OopsLines)], "\n")
	if strings.Contains(lines[i], panicMarker) && i > 0 {
		text = "the console before the guest kernel's panic:\n" + strings.Join(lines[max(0, i-PanicContext):i], "\n") + "\n" + text
	}
	return text
}
