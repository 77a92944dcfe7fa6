package config_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/router"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/site"
	"github.com/ocfw/ocfw/store"
)

// cutDev is a partition in memory that loses power after budget bytes,
// in the middle of a write if that is where the budget ends.
type cutDev struct {
	b      []byte
	budget int64
	dead   bool
}

var errCut = errors.New("power cut")

func (d *cutDev) ReadAt(p []byte, off int64) (int, error) { return copy(p, d.b[off:]), nil }
func (d *cutDev) WriteAt(p []byte, off int64) (int, error) {
	if d.dead {
		return 0, errCut
	}
	if n := int64(len(p)); n > d.budget {
		copy(d.b[off:], p[:d.budget])
		d.dead = true
		return int(d.budget), errCut
	}
	d.budget -= int64(len(p))
	return copy(d.b[off:], p), nil
}
func (d *cutDev) Sync() error {
	if d.dead {
		return errCut
	}
	return nil
}

// hostnames of the configs pushed in turn: gw is the one before any push.
var pushed = []string{"gw1", "gw2", "gw3"}

// session pushes gw1 (confirmed), gw2 (not confirmed: rolled back at its
// deadline), gw3 (confirmed) through a store on dev, until the power
// goes. confirmed is the last hostname whose confirm returned; trying
// the one whose confirm was under way when the power went.
func session(t *testing.T, dev *cutDev) (confirmed, trying string) {
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	m, err := config.New(config.Options{Values: st, Router: &fakeRouter{site: baseSite(nil)}, Ports: ports, Clock: clock, ApplyDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	confirmed = "gw"
	for i, h := range pushed {
		s := baseSite(func(s *site.Site) { s.Hostname = h })
		if _, err := m.Apply(config.ApplyRequest{Site: siteJSON(t, s), Within: time.Minute, Conn: "a"}); err != nil {
			return confirmed, ""
		}
		clock.Advance(time.Second)
		if i == 1 {
			clock.Advance(time.Minute) // no confirm: the rollback writes
			if dev.dead {
				return confirmed, ""
			}
			continue
		}
		if _, err := m.Confirm("b", 0); err != nil {
			return confirmed, h
		}
		confirmed = h
	}
	return confirmed, ""
}

// bootHost is the hostname the box boots after the power comes back.
func bootHost(t *testing.T, dev *cutDev) (string, string) {
	st, err := store.Open(dev, int64(len(dev.b)), store.Options{})
	if err != nil {
		t.Fatalf("the store does not open: %v", err)
	}
	g, note, err := config.AtBoot(st)
	if err != nil {
		t.Fatalf("AtBoot: %v", err)
	}
	if g == nil {
		return "gw", note
	}
	s, errs := router.ReadSite("pushed", []byte(g.Site), ports)
	if len(errs) > 0 {
		t.Fatalf("the booted generation %d does not read whole: %v", g.N, errs)
	}
	if want := pushed[g.N-1]; s.Hostname != want {
		t.Fatalf("generation %d holds %s, want %s", g.N, s.Hostname, want)
	}
	return s.Hostname, note
}

// A power cut at any byte of a push, a confirm or a rollback boots the
// config confirmed last, or the one whose confirm was being written:
// whole, never a provisional one, never none.
func TestPowerCutDuringPushes(t *testing.T) {
	fresh := dataPartition(t)
	probe := &cutDev{b: append([]byte(nil), fresh...), budget: 1 << 40}
	if c, _ := session(t, probe); c != "gw3" {
		t.Fatalf("without a cut the session ends on %s", c)
	}
	total := int64(1<<40) - probe.budget
	step := total / 300
	if testing.Short() {
		step = total / 40
	}
	seen := map[string]int{}
	for cut := int64(0); cut < total; cut += step + cut%7 {
		dev := &cutDev{b: append([]byte(nil), fresh...), budget: cut}
		confirmed, trying := session(t, dev)
		dev.dead, dev.budget = false, 1<<40
		got, note := bootHost(t, dev)
		if got != confirmed && got != trying {
			t.Fatalf("cut at %d of %d: boots %s; confirmed last %s, confirming %q (%s)", cut, total, got, confirmed, trying, note)
		}
		seen[got]++
		// The boot wrote the rollback down: the next boot agrees.
		if again, _ := bootHost(t, dev); again != got {
			t.Fatalf("cut at %d: boots %s, then %s", cut, got, again)
		}
		if !bytes.Equal(outsideStore(t, dev.b), outsideStore(t, fresh)) {
			t.Fatalf("cut at %d: bytes outside the store's files changed", cut)
		}
	}
	t.Logf("%d bytes written by the session; booted after the cuts: %v", total, seen)
	if seen["gw"] == 0 || seen["gw1"] == 0 || seen["gw2"] != 0 {
		t.Errorf("cuts boot %v: want both the first and a pushed config, and never the unconfirmed gw2", seen)
	}
}

func dataPartition(t *testing.T) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.img")
	err := firmware.DataPartition(context.Background(), p, 12<<20, "OCFWDATA", 1700000000)
	if err != nil {
		if !strings.Contains(err.Error(), "not found") {
			t.Fatal(err)
		}
		labtest.SkipOrFail(t, "no data partition to test on (mkfs.fat, mtools): %v", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// outsideStore is the partition with the store's files zeroed: what the
// board must never change.
func outsideStore(t *testing.T, img []byte) []byte {
	t.Helper()
	fsys, err := fat.Open(bytes.NewReader(img), 0, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	c := append([]byte(nil), img...)
	for _, f := range store.Files() {
		e, err := fsys.Extent(store.Dir + "/" + f.Name)
		if err != nil {
			t.Fatal(fmt.Errorf("%s: %w", f.Name, err))
		}
		clear(c[e.Offset : e.Offset+e.Size])
	}
	return c
}
