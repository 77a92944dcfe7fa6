package config_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/site"
)

var ports = []plan.Port{{Name: "wan", Interface: "eth0"}, {Name: "lan1", Interface: "eth1"}}

var sshKey = func() string {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	k, _ := ssh.NewPublicKey(pub)
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}()

// baseSite is a valid site; edit changes it.
func baseSite(edit func(s *site.Site)) *site.Site {
	s := &site.Site{Kind: "site", Board: "alix2d13", Hostname: "gw",
		WAN: site.WAN{Port: "wan", Address: "dhcp"},
		LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24",
			DHCP: site.DHCP{Range: []string{"192.168.1.100", "192.168.1.199"}}},
		SSH: site.SSH{AuthorizedKeys: []string{sshKey}}}
	if edit != nil {
		edit(s)
	}
	return s
}

func siteJSON(t *testing.T, s *site.Site) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeClock runs timers when Advance passes them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock and runs the timers due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			t.stopped = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// fakeRouter records what it is told to apply.
type fakeRouter struct {
	mu    sync.Mutex
	site  *site.Site
	calls [][]string
	fail  error
}

func (r *fakeRouter) Site() *site.Site {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.site
}

func (r *fakeRouter) Reconfigure(s *site.Site, _ router.Files, parts []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, parts)
	if r.fail != nil {
		return r.fail
	}
	r.site = s
	return nil
}

func (r *fakeRouter) Calls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.calls...)
}

// memValues is a store in memory that keeps JSON, as the real one does.
type memValues struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail error
}

func (v *memValues) SetValue(name string, x any) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.fail != nil {
		return v.fail
	}
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if v.m == nil {
		v.m = map[string][]byte{}
	}
	v.m[name] = b
	return nil
}

func (v *memValues) Value(name string, x any) (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	b, ok := v.m[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, x)
}
