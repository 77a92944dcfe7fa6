package qemu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/plan"
)

// TestKernelOops: a failure message shows the guest kernel's fatal
// report from its first line, where the cause is, not only the
// console's tail. The consoles in testdata are real ones: the WARNING
// Debian's kernel prints at every boot with virtio-crypto (its
// self-test of virtio-crypto-rsa, refused by QEMU), which is no oops;
// an early panic of a loaded host's guest ("IO-APIC + timer doesn't
// work!"); the tail of CI's panic in TestEndToEndEngineChoice, whose
// first 60 lines were all the log kept, under a page fault's header;
// and a divide error made on purpose in the test engine's completion,
// with softirqs off, whose header names no marker of the list: before
// the die() header pattern its report was only the panic line, as in
// two CI failures of TestEndToEndEngineChoice.
func TestKernelOops(t *testing.T) {
	for _, tc := range []struct {
		file      string
		wantFirst string // the report's first line; "" for no report
		wantIn    []string
	}{
		{"warning.console", "", nil},
		{"ioapic.console", "Kernel panic - not syncing: IO-APIC + timer doesn't work!", []string{"setup_IO_APIC+0x719/0x73d", "Rebooting in 10 seconds"}},
		{"pagefault.console", "BUG: unable to handle page fault for address: 6b6b6b6b", []string{"Oops: 0000 [#1]", "EIP: __kmem_cache_alloc_node+0x7e/0x380", "Fatal exception in interrupt"}},
		{"divide.console", "divide error: 0000 [#1] PREEMPT SMP", []string{"EIP: testaes_work.cold+0x58/0xbf9 [ocfw_testaes]", "process_one_work+0x182/0x310", "Fatal exception in interrupt", "Rebooting in 10 seconds"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			con := string(b)
			oops := KernelOops(con)
			text := FailureText(con, 20)
			if tc.wantFirst == "" {
				if oops != "" {
					t.Errorf("a report where there is none:\n%s", oops)
				}
				if text != TailLines(con, 20) {
					t.Errorf("FailureText without a report is not the tail:\n%s", text)
				}
				return
			}
			first, _, _ := strings.Cut(oops, "\n")
			if !strings.Contains(first, tc.wantFirst) {
				t.Errorf("the report begins %q, want the line with %q", first, tc.wantFirst)
			}
			for _, w := range append([]string{tc.wantFirst}, tc.wantIn...) {
				if !strings.Contains(text, w) {
					t.Errorf("FailureText lacks %q:\n%s", w, text)
				}
			}
			if strings.Contains(oops, "\r") || strings.Count(oops, "\n")+1 > OopsLines {
				t.Errorf("the report has carriage returns or more than %d lines", OopsLines)
			}
		})
	}
}

// TestKernelOopsBounded: a report longer than OopsLines is cut at
// OopsLines, keeping its top.
func TestKernelOopsBounded(t *testing.T) {
	con := "booting\r\n[ 1.0] BUG: kernel NULL pointer dereference, address: 00000000\r\n" + strings.Repeat("[ 1.1]  ? frame+0x1/0x2\r\n", 3*OopsLines)
	oops := KernelOops(con)
	if n := strings.Count(oops, "\n") + 1; n != OopsLines {
		t.Errorf("%d lines, want %d", n, OopsLines)
	}
	if !strings.HasPrefix(oops, "[ 1.0] BUG: kernel NULL pointer dereference") || strings.Contains(oops, "\r") {
		t.Errorf("the report begins %.80q", oops)
	}
}

// TestFailureTextBeforePanic: a panic line with no report before it
// that KernelOops knows comes with the console lines before it, where
// the kernel may have said why in words no marker has; a report that
// begins before the panic comes without them.
func TestFailureTextBeforePanic(t *testing.T) {
	var b strings.Builder
	for i := range 2 * PanicContext {
		fmt.Fprintf(&b, "[ 5.%03d] line %d\r\n", i, i)
	}
	b.WriteString("[ 5.900] something went wrong in words no marker knows\r\n")
	b.WriteString("[ 6.000] Kernel panic - not syncing: Fatal exception in interrupt\r\n[ 6.001] Kernel Offset: disabled\r\n")
	text := FailureText(b.String(), 20)
	for _, w := range []string{"the console before the guest kernel's panic:", "in words no marker knows", fmt.Sprintf("line %d\n", PanicContext+1), "the guest kernel's report:\n[ 6.000] Kernel panic", "Kernel Offset: disabled"} {
		if !strings.Contains(text, w) {
			t.Errorf("FailureText lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, fmt.Sprintf("line %d\n", PanicContext-1)) || strings.Contains(text, "\r") {
		t.Errorf("FailureText keeps more than %d lines before the panic, or carriage returns:\n%s", PanicContext, text)
	}

	div, err := os.ReadFile(filepath.Join("testdata", "divide.console"))
	if err != nil {
		t.Fatal(err)
	}
	if text := FailureText(string(div), 20); strings.Contains(text, "before the guest kernel's panic") || !strings.HasPrefix(text, "the guest kernel's report:\n[    6.316554] divide error") {
		t.Errorf("a report that begins before its panic:\n%s", text)
	}
}

// TestFailureTextDaemonDied: the firmware's report of its dead daemon is
// not the kernel's and comes with the console lines before it, where a
// Go runtime's trace of what killed the daemon is.
func TestFailureTextDaemonDied(t *testing.T) {
	var b strings.Builder
	for i := range 2 * PanicContext {
		fmt.Fprintf(&b, "ocfw: line %d\r\n", i)
	}
	b.WriteString("SIGILL: illegal instruction\r\nPC=0x80db80c m=0 sigcode=2\r\n")
	b.WriteString(plan.MarkDaemonDied + " (signal: illegal instruction); the router is not running. The kernel's last messages:\r\n")
	b.WriteString("  <6>[    9.9] potentially unexpected fatal signal 4.\r\n" + plan.MarkDone + "\r\n")
	text := FailureText(b.String(), 20)
	for _, w := range []string{"the console before the firmware's daemon died:\n", "SIGILL: illegal instruction\nPC=0x80db80c", "\nthe firmware's report of it:\n" + plan.MarkDaemonDied, "fatal signal 4.", fmt.Sprintf("line %d\n", PanicContext+2)} {
		if !strings.Contains(text, w) {
			t.Errorf("FailureText lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "kernel's report") || strings.Contains(text, fmt.Sprintf("line %d\n", PanicContext+1)) {
		t.Errorf("FailureText calls the daemon's death the kernel's, or keeps more than %d lines before it:\n%s", PanicContext, text)
	}
}
