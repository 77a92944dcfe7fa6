package router

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocfw/ocfw/site"
)

// capture collects log lines.
type capture struct {
	mu    sync.Mutex
	lines []string
}

func (c *capture) logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, fmt.Sprintf(format, args...))
}

func (c *capture) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// A minute's flood of 10,000 events from 250 sources costs at most the
// stated number of lines, and the summary says how many were held back
// and from how many sources.
func TestEventLimiterBoundsAFlood(t *testing.T) {
	clock := time.Unix(1700000000, 0)
	var out []string
	l := newEventLimiter(func() time.Time { return clock }, func(line string) { out = append(out, line) })
	const kind = "dhcp: no address for %s: %v"
	for i := 0; i < 10000; i++ {
		mac := fmt.Sprintf("3c:00:00:00:%02x:%02x", (i%250)/256, i%250)
		clock = clock.Add(6 * time.Millisecond) // 10,000 in a minute
		l.event(kind, mac, "dhcp: no address for "+mac+": the pool is full")
	}
	for i := 0; i < 1204+3; i++ {
		l.event("ssh: refused %s: already %d connections", "6.6.6.6", "ssh: refused 6.6.6.6:4000: already 4 connections")
	}
	l.flush()
	// The all-events bucket: its burst, one more per eventAllEvery over
	// the minute; then one summary per kind.
	bound := eventAllBurst + int(time.Minute/eventAllEvery) + 2
	if len(out) > bound {
		t.Errorf("%d lines for a minute's flood, want at most %d", len(out), bound)
	}
	logged := len(out) - 2
	text := strings.Join(out, "\n")
	wantDHCP := fmt.Sprintf("[and %s more like this from 250 sources not logged in the last minute]", thousands(10000-(logged-3)))
	if !strings.Contains(text, wantDHCP) {
		t.Errorf("no DHCP summary %q in:\n%s", wantDHCP, text)
	}
	// One source: its bucket's burst, then the rest in the summary.
	if !strings.Contains(text, "ssh: refused 6.6.6.6:4000: already 4 connections [and 1,204 more like this not logged in the last minute]") {
		t.Errorf("no SSH summary in:\n%s", text)
	}
	// After a quiet minute, a source is heard again.
	out = nil
	clock = clock.Add(2 * time.Minute)
	l.event(kind, "aa:bb:cc:dd:ee:ff", "dhcp: no address for aa:bb:cc:dd:ee:ff")
	if len(out) != 1 {
		t.Errorf("after a quiet minute: %q, want the line", out)
	}
}

// sourceOf finds the client in the services' log arguments.
func TestSourceOf(t *testing.T) {
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"3C:00:00:00:00:01", fmt.Errorf("full")}, "3c:00:00:00:00:01"},
		{[]any{"192.168.1.7", "3c:00:00:00:00:01"}, "3c:00:00:00:00:01"},
		{[]any{"root", "6.6.6.6:41234", "key"}, "6.6.6.6"},
		{[]any{fakeAddr("[2001:db8::1]:22"), 4}, "2001:db8::1"},
		{[]any{"no address here"}, ""},
	} {
		if got := sourceOf(tc.args); got != tc.want {
			t.Errorf("sourceOf(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// The host name: escape sequences and a forged line.
const evilHost = "evil\x1b]0;PWNED\a\x1b[2J...\r\nocfw: ssh: root logged in from 6.6.6.6 with key SHA256:forged"

// noInjection fails when text could drive a terminal or holds a line
// that looks like the router's own SSH log.
func noInjection(t *testing.T, where, text string) {
	t.Helper()
	if strings.ContainsAny(text, "\x1b\r\a\u009b") || strings.IndexByte(text, 0x9b) >= 0 {
		t.Errorf("%s: a control character survived: %q", where, text)
	}
	for _, line := range strings.Split(text, "\n") {
		if l := strings.TrimLeft(line, " "); strings.HasPrefix(l, "ocfw: ssh:") || strings.HasPrefix(l, "ssh:") {
			t.Errorf("%s: a forged line: %q", where, line)
		}
	}
	if !strings.Contains(text, `evil\x1b]0;PWNED\x07\x1b[2J...\r\nocfw: ssh: root logged in`) {
		t.Errorf("%s: the host name is not shown escaped: %q", where, text)
	}
}

// A DHCP client's host name reaches the log (logf, the services' event
// log), the recent events and `ocf net`'s text only escaped.
func TestLogInjection(t *testing.T) {
	var log, events capture
	r := newRouter(Config{Site: &site.Site{Hostname: "gw"}, Log: log.logf, EventLog: events.logf})
	r.logf("lease %s to %s (%s) for %s", "192.168.1.100", "3c:00:00:00:00:01", evilHost, "12h")
	r.serviceLog()("lease %s to %s (%s) for %s", "192.168.1.101", "3c:00:00:00:00:02", evilHost, "12h")
	r.quietf("ntp: %s", evilHost)
	for _, l := range log.all() {
		noInjection(t, "Config.Log", "ocfw: "+l)
	}
	if got := events.all(); len(got) != 1 {
		t.Errorf("event log: %q, want the one line", got)
	} else {
		noInjection(t, "Config.EventLog", "ocfw: "+got[0])
	}
	st := Status{Hostname: "gw", Events: r.events,
		Leases:   []string{"192.168.1.100 3c:00:00:00:00:01 " + evilHost + " until 2026-01-01T00:00:00Z"},
		Services: map[string]string{"dhcp": evilHost}}
	if len(st.Events) != 3 {
		t.Fatalf("recent events %q, want 3", st.Events)
	}
	var text bytes.Buffer
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	noInjection(t, "ocf net", text.String())
}
