package slots

import (
	"strings"
	"testing"
)

func TestConfigFixedSizeAndDefault(t *testing.T) {
	cfg, err := Config("ocfw for test", SlotA, "console=ttyS0,38400n8 panic=10")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg) != CfgSize {
		t.Fatalf("config is %d bytes, want %d", len(cfg), CfgSize)
	}
	for _, want := range []string{"\nDEFAULT a\n", "LABEL b\n  LINUX /b/vmlinuz\n  INITRD /b/initrd\n  APPEND console=ttyS0,38400n8 panic=10 ocfw.slot=b\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	// The DEFAULT line is in the first sector: its rewrite is one sector.
	if i := strings.Index(cfg, "\nDEFAULT "); i < 0 || i > 500 {
		t.Errorf("DEFAULT at %d", i)
	}
	b, err := SetDefault([]byte(cfg), SlotB)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := Default(b); d != SlotB || len(b) != len(cfg) {
		t.Errorf("after SetDefault(b): default %q, %d bytes", d, len(b))
	}
	diff := 0
	for i := range b {
		if b[i] != cfg[i] {
			diff++
		}
	}
	if diff != 1 {
		t.Errorf("SetDefault changed %d bytes, want 1", diff)
	}
	for _, bad := range []string{"PROMPT 0\n", "\nDEFAULT ocfw\n", "\nDEFAULT c\n"} {
		if _, err := Default([]byte(bad)); err == nil {
			t.Errorf("Default(%q) gave no error", bad)
		}
	}
	if _, err := Config("x", "c", ""); err == nil {
		t.Error("default slot c accepted")
	}
	if _, err := Config("x", SlotA, strings.Repeat("y", 1000)); err == nil {
		t.Error("a config over its fixed size accepted")
	}
}

func TestSlotChoiceAndNames(t *testing.T) {
	for _, tc := range []struct{ cmdline, booted, other string }{
		{"console=ttyS0 panic=10 ocfw.slot=a", "a", "b"},
		{"ocfw.slot=b quiet", "b", "a"},
		{"console=ttyS0 ocfw.slot=c", "", ""},
		{"console=ttyS0", "", ""},
	} {
		got := BootedSlot(tc.cmdline)
		if got != tc.booted {
			t.Errorf("BootedSlot(%q) = %q, want %q", tc.cmdline, got, tc.booted)
		}
		if got != "" && Other(got) != tc.other {
			t.Errorf("Other(%q) = %q", got, Other(got))
		}
	}
	if Kernel("b") != "/b/vmlinuz" || Initrd("a") != "/a/initrd" {
		t.Error("slot file names")
	}
	if Revision("1", "2") == Revision("2", "1") || len(Revision("1", "2")) != 12 {
		t.Error("revision does not tell the kernel from the initramfs, or is not 12 digits")
	}
}

func TestSlotSizes(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ k, i, wk, wi int64 }{
		{5728192, 2300000, 9 * mib, 8 * mib},
		{1000, 1000, 8 * mib, 8 * mib},
		{8 * mib, 6 * mib, 12 * mib, 12 * mib},
	} {
		k, i := SlotSizes(tc.k, tc.i)
		if k != tc.wk || i != tc.wi {
			t.Errorf("SlotSizes(%d, %d) = %d, %d, want %d, %d", tc.k, tc.i, k, i, tc.wk, tc.wi)
		}
	}
}
