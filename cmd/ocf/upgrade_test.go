package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/boot/upgrade"
)

// The upgrade socket answers from the daemon's start: "still booting"
// until the boot sequence is done, then that a box without slots takes
// no upgrade; never a dial error while SSH already answers.
func TestUpgradeSocketWhileBooting(t *testing.T) {
	dir, err := os.MkdirTemp("", "ocfup") // a short path: unix sockets take 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "run", "upgrade.sock")
	l, err := listenUpgrade(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := &bootState{}
	go serveUpgrade(l, st, io.Discard)
	status := func() error { return upgradeRequest(socket, strings.NewReader("status\n"), io.Discard) }
	if err := status(); err == nil || !strings.Contains(err.Error(), upgrade.StillBooting+": its boot sequence is not done yet") {
		t.Errorf("while booting: %v, want %q", err, upgrade.StillBooting)
	}
	st.finish(&boot.Outcome{})
	if err := status(); err == nil || !strings.Contains(err.Error(), "no slots on this card") {
		t.Errorf("booted without slots: %v", err)
	}
	l.Close()
	os.Remove(socket)
	if err := status(); err == nil || !strings.Contains(err.Error(), "daemon does not answer") {
		t.Errorf("no daemon: %v", err)
	}
}
