package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelOops: a failure message shows the guest kernel's fatal
// report from its first line, where the cause is, not only the
// console's tail. The consoles in testdata are real ones: the WARNING
// Debian's kernel prints at every boot with virtio-crypto (its
// self-test of virtio-crypto-rsa, refused by QEMU), which is no oops;
// an early panic of a loaded host's guest ("IO-APIC + timer doesn't
// work!"); and the tail of CI's panic in TestEndToEndEngineChoice, whose
// first 60 lines were all the log kept, under a page fault's header.
func TestKernelOops(t *testing.T) {
	for _, tc := range []struct {
		file      string
		wantFirst string // the report's first line; "" for no report
		wantIn    []string
	}{
		{"warning.console", "", nil},
		{"ioapic.console", "Kernel panic - not syncing: IO-APIC + timer doesn't work!", []string{"setup_IO_APIC+0x719/0x73d", "Rebooting in 10 seconds"}},
		{"pagefault.console", "BUG: unable to handle page fault for address: 6b6b6b6b", []string{"Oops: 0000 [#1]", "EIP: __kmem_cache_alloc_node+0x7e/0x380", "Fatal exception in interrupt"}},
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
