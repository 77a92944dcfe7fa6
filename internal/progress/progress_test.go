package progress

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Each tick prints the step and the time since it started; after stop,
// nothing more.
func TestLines(t *testing.T) {
	var buf bytes.Buffer
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ticks := make(chan time.Time)
	stop := run(&buf, "building the Go userland (GOARCH=386)", nil, start, ticks)
	ticks <- start.Add(10 * time.Second)
	ticks <- start.Add(20*time.Second + 400*time.Millisecond)
	ticks <- start.Add(90 * time.Second)
	stop()
	stop() // twice is fine
	want := "ocfw: building the Go userland (GOARCH=386) ... 10s\n" +
		"ocfw: building the Go userland (GOARCH=386) ... 20s\n" +
		"ocfw: building the Go userland (GOARCH=386) ... 1m30s\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	select {
	case ticks <- start.Add(100 * time.Second):
		t.Error("a tick was taken after stop")
	default:
	}
}

// A step that can say how far it got says it on each line.
func TestStatus(t *testing.T) {
	var buf bytes.Buffer
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ticks := make(chan time.Time)
	n := 0
	stop := run(&buf, "fetching linux-image-686", func() string {
		n++
		if n == 1 {
			return ""
		}
		return strconv.Itoa(n) + " MB so far"
	}, start, ticks)
	ticks <- start.Add(10 * time.Second)
	ticks <- start.Add(20 * time.Second)
	stop()
	want := "ocfw: fetching linux-image-686 ... 10s\n" +
		"ocfw: fetching linux-image-686 ... 20s, 2 MB so far\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// Stopped before its first tick, a step prints nothing.
func TestStartStop(t *testing.T) {
	Start(nil, "anything")()
	var buf bytes.Buffer
	stop := Start(&buf, "a short step")
	stop()
	stop()
	if buf.Len() != 0 {
		t.Errorf("a step stopped at once printed %q", buf.String())
	}
}

// Progress goes to a terminal only: not to a file or a buffer.
func TestTerminal(t *testing.T) {
	if Terminal(&bytes.Buffer{}) != nil {
		t.Error("a buffer counts as a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Terminal(f) != nil {
		t.Error("a file counts as a terminal")
	}
	pty, tty := openPTY(t)
	defer pty.Close()
	defer tty.Close()
	if Terminal(tty) == nil {
		t.Error("a pseudo-terminal does not count as a terminal")
	}
}

// openPTY opens a pseudo-terminal pair: the master and the terminal.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(pty.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		pty.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(pty.Fd()), unix.TIOCGPTN)
	if err != nil {
		pty.Close()
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		pty.Close()
		t.Fatal(err)
	}
	return pty, tty
}
