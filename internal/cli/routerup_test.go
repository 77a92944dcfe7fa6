package cli

import (
	"strings"
	"testing"
)

// try leaves a router someone is trying running; everything else powers
// off after the report as before.
func TestTryPowersOff(t *testing.T) {
	for _, tc := range []struct {
		site, terminal, asked, want bool
	}{
		{site: false, terminal: true, want: true},
		{site: true, terminal: true, want: false},
		{site: true, terminal: true, asked: true, want: true},
		{site: true, terminal: false, want: true},
	} {
		if got := tryPowersOff(tc.site, tc.terminal, tc.asked); got != tc.want {
			t.Errorf("site %v terminal %v --poweroff-after-report %v: powers off %v, want %v", tc.site, tc.terminal, tc.asked, got, tc.want)
		}
	}
}

func TestRouterHint(t *testing.T) {
	h := routerHint(2222, true)
	for _, w := range []string{"ssh -p 2222 root@127.0.0.1", "'ocf poweroff'", "Ctrl-A x", "\r\n"} {
		if !strings.Contains(h, w) {
			t.Errorf("hint %q lacks %q", h, w)
		}
	}
	if h := routerHint(0, false); strings.Contains(h, "ssh -p") || !strings.Contains(h, "Ctrl-C") {
		t.Errorf("no forward, not at a terminal: %q", h)
	}
	// The try flags that reach the router exist, as the help says.
	out, _, code := ocfw(t, "try", "--help")
	for _, w := range []string{"--ssh-port", "--poweroff-after-report", "ssh -p 2222 root@127.0.0.1", "IMAGE.state"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("try --help lacks %q", w)
		}
	}
}
