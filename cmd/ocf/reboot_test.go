package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeProc writes a /proc with processes pid -> (argv, state).
func fakeProc(t *testing.T, procs map[string][2]string) string {
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, pid)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "cmdline"), []byte(strings.ReplaceAll(p[0], " ", "\x00")+"\x00"), 0o644)
		os.WriteFile(filepath.Join(d, "stat"), []byte(pid+" (bb (x)) "+p[1]+" 1 1 1"), 0o644)
	}
	return dir
}

func TestRebootStopsTheDaemonFirst(t *testing.T) {
	proc := fakeProc(t, map[string][2]string{
		"1":   {"/init", "S"},
		"42":  {"ocf daemon", "S"},
		"43":  {"/bbin/ocfsh", "S"},
		"44":  {"ocf net", "R"},
		"abc": {"ocf daemon", "S"},
	})
	var steps []string
	s := &shutdown{proc: proc, grace: 5 * time.Second, out: &bytes.Buffer{},
		signal: func(pid int, sig syscall.Signal) error {
			steps = append(steps, "signal "+itoa(pid)+" "+sig.String())
			// The daemon ends: a zombie until init reaps it.
			os.WriteFile(filepath.Join(proc, "42", "stat"), []byte("42 (bb) Z 1 1"), 0o644)
			return nil
		},
		sync:   func() { steps = append(steps, "sync") },
		reboot: func(cmd int) error { steps = append(steps, "reboot "+itoa(cmd)); return nil },
	}
	if err := s.run("reboot", unix.LINUX_REBOOT_CMD_RESTART); err != nil {
		t.Fatal(err)
	}
	want := "signal 42 terminated|sync|reboot " + itoa(unix.LINUX_REBOOT_CMD_RESTART)
	if got := strings.Join(steps, "|"); got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
}

// A daemon that does not stop delays the restart by the grace only.
func TestRebootGoesOnAfterTheGrace(t *testing.T) {
	proc := fakeProc(t, map[string][2]string{"42": {"ocf daemon", "S"}})
	var out bytes.Buffer
	rebooted := false
	s := &shutdown{proc: proc, grace: 300 * time.Millisecond, out: &out,
		signal: func(int, syscall.Signal) error { return nil },
		sync:   func() {},
		reboot: func(int) error { rebooted = true; return nil }}
	if err := s.run("poweroff", unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil || !rebooted {
		t.Fatalf("run: %v, rebooted %v", err, rebooted)
	}
	if !strings.Contains(out.String(), "still running after 300ms") {
		t.Errorf("output %q does not say the router did not stop", out.String())
	}
}

func itoa(n int) string { return fmt.Sprint(n) }
