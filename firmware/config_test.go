package firmware

import (
	"strings"
	"testing"
)

func TestSyslinuxConfig(t *testing.T) {
	for _, tc := range []struct {
		board, console string
	}{
		{"alix2d13", "APPEND console=ttyS0,38400n8 panic=10 ocfw.slot=a"},
		{"net5501", "APPEND console=ttyS0,19200n8 panic=10 ocfw.slot=a"},
	} {
		cfg, err := SyslinuxConfig(testPlan(t, tc.board))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{tc.console, "LINUX /a/vmlinuz", "INITRD /a/initrd", "LINUX /b/vmlinuz", "DEFAULT a", "PROMPT 0"} {
			if !strings.Contains(cfg, want+"\n") {
				t.Errorf("%s: config lacks %q:\n%s", tc.board, want, cfg)
			}
		}
		// The BIOS copies SYSLINUX's screen to the serial port: SERIAL
		// would print every line twice.
		if strings.Contains(cfg, "\nSERIAL") {
			t.Errorf("%s: config has a SERIAL directive:\n%s", tc.board, cfg)
		}
	}
	p := testPlan(t, "alix2d13")
	p.Console.Device = "tty0"
	if _, err := SyslinuxConfig(p); err == nil {
		t.Error("a VGA console accepted for SYSLINUX's serial line")
	}
}
