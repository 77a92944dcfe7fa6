package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	bu "github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/internal/upgrade"
)

// fakeBox answers `ocf upgrade status` and `receive` as the board does.
type fakeBox struct {
	board, rev string
	received   []byte
	header     bu.Header
	afterBoot  string // the last line once the box has the system
	calls      []string
	booting    int // status requests answered "still booting" first
}

func (b *fakeBox) Run(_ context.Context, command string, stdin io.Reader, stdout io.Writer) error {
	b.calls = append(b.calls, command)
	switch command {
	case "ocf upgrade status":
		if b.booting > 0 {
			b.booting--
			return fmt.Errorf("ssh root@box ocf upgrade status: exit status 1: ocf: %s: its boot sequence is not done yet (the self-test runs); try again in a moment", bu.StillBooting)
		}
		fmt.Fprintf(stdout, "board %s\nslot a\nrevision %s\n", b.board, b.rev)
		if b.received != nil {
			fmt.Fprintf(stdout, "last %s\n", b.afterBoot)
		}
		fmt.Fprintln(stdout, "ok")
		return nil
	case "ocf upgrade receive":
		h, err := bu.ReadHeader(stdin)
		if err != nil {
			return err
		}
		b.header = h
		b.received, err = io.ReadAll(stdin)
		if strings.HasSuffix(b.afterBoot, " committed") {
			b.rev = h.Revision
		}
		return err
	}
	return fmt.Errorf("unexpected command %q", command)
}

func TestUpgradeHostSide(t *testing.T) {
	img, m := smallImage(t)
	if m.System == nil {
		t.Fatal("the image's manifest names no system")
	}
	rev := m.System.Revision
	run := func(box *fakeBox) (*upgrade.Result, string, error) {
		var out bytes.Buffer
		res, err := upgrade.Run(context.Background(), upgrade.Options{Image: img, Remote: box, Out: &out, Poll: time.Millisecond, Wait: time.Minute})
		return res, out.String(), err
	}
	t.Run("another board refused before sending", func(t *testing.T) {
		box := &fakeBox{board: "net5501", rev: "0123456789ab"}
		_, _, err := run(box)
		if err == nil || !strings.Contains(err.Error(), "is for board alix2d13; the box is a net5501: nothing sent") {
			t.Errorf("err %v", err)
		}
		if len(box.calls) != 1 || box.received != nil {
			t.Errorf("calls %v", box.calls)
		}
	})
	t.Run("the same revision is not sent", func(t *testing.T) {
		box := &fakeBox{board: "alix2d13", rev: rev}
		if _, _, err := run(box); err == nil || box.received != nil {
			t.Errorf("err %v, received %d bytes", err, len(box.received))
		}
	})
	t.Run("committed", func(t *testing.T) {
		box := &fakeBox{board: "alix2d13", rev: "0123456789ab", afterBoot: "upgrade to " + rev + " committed"}
		res, out, err := run(box)
		if err != nil || !res.Committed || res.From != "0123456789ab" || res.To != rev {
			t.Fatalf("res %+v err %v\n%s", res, err, out)
		}
		k := box.received[:box.header.Kernel.Size]
		if int64(len(box.received)) != box.header.Kernel.Size+box.header.Initrd.Size ||
			fmt.Sprintf("%x", sha256.Sum256(k)) != m.System.Kernel.SHA256 || box.header.Board != "alix2d13" {
			t.Errorf("the stream: %d bytes, header %+v", len(box.received), box.header)
		}
		if !strings.Contains(out, "upgrade to "+rev+" committed") {
			t.Errorf("output lacks the result:\n%s", out)
		}
	})
	t.Run("rolled back", func(t *testing.T) {
		box := &fakeBox{board: "alix2d13", rev: "0123456789ab", afterBoot: "upgrade to " + rev + " rolled back: no network: the WAN (eth0) has no address"}
		_, out, err := run(box)
		if !errors.Is(err, upgrade.ErrRolledBack) || !strings.Contains(err.Error(), "no network") {
			t.Errorf("err %v\n%s", err, out)
		}
	})
	t.Run("no-wait", func(t *testing.T) {
		box := &fakeBox{board: "alix2d13", rev: "0123456789ab", afterBoot: "upgrade to " + rev + " pending"}
		var out bytes.Buffer
		res, err := upgrade.Run(context.Background(), upgrade.Options{Image: img, Remote: box, Out: &out, NoWait: true})
		if err != nil || res.Waited || len(box.calls) != 2 {
			t.Errorf("res %+v err %v calls %v", res, err, box.calls)
		}
	})
}

// An upgrade asked while the box is still booting (SSH up, its boot
// sequence not done) waits for it, saying so, within a bound.
func TestUpgradeWhileBooting(t *testing.T) {
	img, m := smallImage(t)
	rev := m.System.Revision
	box := &fakeBox{board: "alix2d13", rev: "0123456789ab", afterBoot: "upgrade to " + rev + " committed", booting: 3}
	var out bytes.Buffer
	res, err := upgrade.Run(context.Background(), upgrade.Options{Image: img, Remote: box, Out: &out, Poll: time.Millisecond, Wait: time.Minute})
	if err != nil || !res.Committed || !strings.Contains(out.String(), bu.StillBooting+"; waiting for its boot sequence to end") {
		t.Errorf("res %+v err %v\n%s", res, err, out.String())
	}
	box = &fakeBox{board: "alix2d13", rev: "0123456789ab", booting: 1 << 30}
	_, err = upgrade.Run(context.Background(), upgrade.Options{Image: img, Remote: box, Out: io.Discard, Poll: time.Millisecond, BootWait: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), bu.StillBooting) || !strings.Contains(err.Error(), "still so after 50ms") || box.received != nil {
		t.Errorf("a box that stays booting: %v", err)
	}
}

func TestUpgradeCLIArgs(t *testing.T) {
	_, errs, code := ocfw(t, "upgrade", "only-an-image.img")
	if code == 0 || !strings.Contains(errs, "upgrade needs the new image and the box's address") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// push and upgrade log in one way: the same SSH flags, the same words.
func TestSSHFlagsShared(t *testing.T) {
	root := NewRootCmd()
	var push, up *cobra.Command
	for _, c := range root.Commands() {
		switch c.Name() {
		case "push":
			push = c
		case "upgrade":
			up = c
		}
	}
	for _, name := range []string{"user", "port", "identity", "known-hosts", "host-key", "accept-new"} {
		p, u := push.Flags().Lookup(name), up.Flags().Lookup(name)
		if p == nil || u == nil || p.Usage != u.Usage || p.Shorthand != u.Shorthand {
			t.Errorf("--%s: push %v, upgrade %v", name, p, u)
		}
	}
	if up.Flags().Lookup("ssh-option") != nil {
		t.Error("upgrade still takes OpenSSH options: it would check host keys another way")
	}
	_, errs, code := ocfw(t, "upgrade", "--host-key", "MD5:aa", "x.img", "127.0.0.1")
	if code == 0 || !strings.Contains(errs, "--host-key \"MD5:aa\"") {
		t.Errorf("a bad --host-key: exit %d, %s", code, errs)
	}
}
