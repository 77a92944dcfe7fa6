package firmware

import (
	"strings"
	"testing"
)

func TestSyslinuxConfig(t *testing.T) {
	for _, tc := range []struct {
		board, serial, console string
	}{
		{"alix2d13", "SERIAL 0 38400", "APPEND console=ttyS0,38400n8 panic=10"},
		{"net5501", "SERIAL 0 19200", "APPEND console=ttyS0,19200n8 panic=10"},
	} {
		cfg, err := SyslinuxConfig(testPlan(t, tc.board))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{tc.serial, tc.console, "LINUX /vmlinuz", "INITRD /initrd", "PROMPT 0", "CONSOLE 0"} {
			if !strings.Contains(cfg, want+"\n") {
				t.Errorf("%s: config lacks %q:\n%s", tc.board, want, cfg)
			}
		}
	}
	p := testPlan(t, "alix2d13")
	p.Console.Device = "tty0"
	if _, err := SyslinuxConfig(p); err == nil {
		t.Error("a VGA console accepted for SYSLINUX's serial line")
	}
}
