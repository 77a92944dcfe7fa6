// Package upgrade is the host's side of `ocfw upgrade IMAGE HOST`: it
// reads the new system out of a bios-cf image, asks the box over SSH
// which board it is, refuses another board's image before sending
// anything, streams the system to `ocf upgrade receive` and waits for the
// box to come back and say whether the new system committed itself or
// was rolled back, and why. The board's side is boot/upgrade.
package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/firmware"
)

// Remote runs a command on the box: an sshclient.Client, the login and
// host key check ocfw push uses too.
type Remote interface {
	Run(ctx context.Context, command string, stdin io.Reader, stdout io.Writer) error
}

// Options are an upgrade's.
type Options struct {
	Image  string
	Remote Remote
	Out    io.Writer
	// NoWait returns once the box has the new system and resets into it.
	NoWait bool
	// Wait bounds the wait for the result; 0 means 15 minutes.
	Wait time.Duration
	// Poll is the time between status requests; 0 means 5 s.
	Poll time.Duration
	// BootWait bounds the wait for a box whose boot sequence is not
	// done yet (SSH answers before it is); 0 means 3 minutes.
	BootWait time.Duration
}

// Status is what `ocf upgrade status` says.
type Status struct {
	Board, Slot, Revision string
	Last                  string // the last upgrade's message
}

// ReadStatus asks the box.
func ReadStatus(ctx context.Context, r Remote) (*Status, error) {
	var out bytes.Buffer
	if err := r.Run(ctx, "ocf upgrade status", nil, &out); err != nil {
		return nil, err
	}
	return parseStatus(out.String())
}

func parseStatus(s string) (*Status, error) {
	st := &Status{}
	ok := false
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "board":
			st.Board = v
		case "slot":
			st.Slot = v
		case "revision":
			st.Revision = v
		case "last":
			st.Last = v
		case "ok":
			ok = true
		}
	}
	if !ok || st.Board == "" {
		return nil, fmt.Errorf("the box's upgrade status is not understood: %q", s)
	}
	return st, nil
}

// Result is how an upgrade ended.
type Result struct {
	From, To  string // revisions
	Committed bool
	Message   string // the box's words: "upgrade to R committed" or "... rolled back: reason"
	Waited    bool
}

// ErrRolledBack says the box rolled the new system back.
var ErrRolledBack = errors.New("rolled back")

// rolledBack is the box's own line, which says it (errors.Is
// ErrRolledBack).
type rolledBack struct{ line string }

func (e rolledBack) Error() string        { return e.line }
func (e rolledBack) Is(target error) bool { return target == ErrRolledBack }

// Run is `ocfw upgrade`.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Wait == 0 {
		o.Wait = 15 * time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 5 * time.Second
	}
	sys, err := firmware.OpenSystem(o.Image)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	m := sys.Manifest
	st, err := readStatusBooted(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("asking the box which board it is: %w", err)
	}
	res := &Result{From: st.Revision, To: m.System.Revision}
	if st.Board != m.Board {
		return nil, fmt.Errorf("%s is for board %s; the box is a %s: nothing sent", o.Image, m.Board, st.Board)
	}
	if st.Revision == m.System.Revision {
		return nil, fmt.Errorf("the box runs %s already (slot %s): nothing sent", st.Revision, st.Slot)
	}
	fmt.Fprintf(o.Out, "%s: board %s, system %s (slot %s); sending %s (kernel %d bytes, initramfs %d bytes)\n",
		o.Image, st.Board, st.Revision, st.Slot, m.System.Revision, m.System.Kernel.Size, m.System.Initrd.Size)
	h := bu.Header{Board: m.Board, Revision: m.System.Revision,
		Kernel: bu.FileSum{Size: m.System.Kernel.Size, SHA256: m.System.Kernel.SHA256},
		Initrd: bu.FileSum{Size: m.System.Initrd.Size, SHA256: m.System.Initrd.SHA256}}
	if m.Builder != nil {
		h.Builder = m.Builder.Revision
	}
	pr, pw := io.Pipe()
	go func() {
		err := bu.WriteHeader(pw, h)
		if err == nil {
			_, err = io.Copy(pw, sys.Reader())
		}
		pw.CloseWithError(err)
	}()
	if err := o.Remote.Run(ctx, "ocf upgrade receive", pr, o.Out); err != nil {
		return nil, fmt.Errorf("the box did not take the new system: %w", err)
	}
	if o.NoWait {
		return res, nil
	}
	fmt.Fprintf(o.Out, "waiting for the box to boot %s and prove it (at most %v)\n", h.Revision, o.Wait)
	res.Waited = true
	ctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	time.Sleep(min(o.Poll, 10*time.Second)) // the box is resetting
	var last error
	for {
		st, err := ReadStatus(ctx, o.Remote)
		if err == nil {
			if done, ok := outcome(st, h.Revision); done {
				res.Message, res.Committed = st.Last, ok
				fmt.Fprintln(o.Out, st.Last)
				if !ok {
					return res, rolledBack{st.Last}
				}
				return res, nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("no result from the box after %v (last: %v)", o.Wait, last)
		case <-time.After(o.Poll):
		}
	}
}

// readStatusBooted asks the box for its status, waiting (at most
// BootWait) while it says it is still booting: SSH comes up some 20 s
// before the boot sequence is done and the box takes upgrades.
func readStatusBooted(ctx context.Context, o Options) (*Status, error) {
	if o.BootWait == 0 {
		o.BootWait = 3 * time.Minute
	}
	deadline := time.Now().Add(o.BootWait)
	said := false
	for {
		st, err := ReadStatus(ctx, o.Remote)
		if err == nil || !strings.Contains(err.Error(), bu.StillBooting) {
			return st, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w; still so after %v: try again later", err, o.BootWait)
		}
		if !said {
			fmt.Fprintf(o.Out, "%s; waiting for its boot sequence to end (at most %v)\n", bu.StillBooting, o.BootWait)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}

// outcome reads whether the status settles the upgrade to rev, and how.
func outcome(st *Status, rev string) (done, committed bool) {
	prefix := "upgrade to " + rev + " "
	if !strings.HasPrefix(st.Last, prefix) {
		return false, false
	}
	switch rest := strings.TrimPrefix(st.Last, prefix); {
	case rest == bu.Committed:
		return true, st.Revision == rev
	case strings.HasPrefix(rest, bu.RolledBack):
		return true, false
	}
	return false, false
}
