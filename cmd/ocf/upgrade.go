package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/boot/upgrade"
	"github.com/ocfw/ocfw/plan"
)

// upgradeSocket is where the daemon, the store's one writer, takes
// `ocf upgrade` requests.
const upgradeSocket = plan.RunDir + "/upgrade.sock"

// newUpgradeCmd builds `upgrade receive|status`, run by `ocfw upgrade`
// over SSH.
func newUpgradeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Receive a new system into the inactive slot, or show the upgrade's state",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "receive",
		Short: "Read a new system on stdin (from ocfw upgrade), write it into the inactive slot, verify it, boot it once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return upgradeRequest(upgradeSocket, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}, &cobra.Command{
		Use:   "status",
		Short: "Show the running system's revision and the last upgrade's state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return upgradeRequest(upgradeSocket, strings.NewReader("status\n"), cmd.OutOrStdout())
		},
	})
	return cmd
}

// upgradeRequest sends in to the daemon and copies its answer to out;
// the answer's last line is "ok ..." or "error ...".
func upgradeRequest(socket string, in io.Reader, out io.Writer) error {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("the firmware's daemon does not answer (%v): it is not running, so this box takes no upgrade now", err)
	}
	defer conn.Close()
	go func() {
		io.Copy(conn, in)
		conn.(*net.UnixConn).CloseWrite()
	}()
	s := bufio.NewScanner(conn)
	last := ""
	for s.Scan() {
		last = s.Text()
		fmt.Fprintln(out, last)
	}
	if rest, ok := strings.CutPrefix(last, "error "); ok {
		return errors.New(rest)
	}
	if !strings.HasPrefix(last, "ok") {
		return errors.New("the daemon's answer ended early")
	}
	return nil
}

// listenUpgrade opens the upgrade socket as the daemon starts, before
// the boot sequence: SSH answers during the sequence, and an upgrade
// asked then must hear that the box is still booting, not that it
// takes no upgrade.
func listenUpgrade(socket string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, err
	}
	os.Remove(socket)
	return net.Listen("unix", socket)
}

// bootState is the boot sequence as the upgrade socket sees it: done
// once it finished, with its outcome.
type bootState struct {
	mu   sync.Mutex
	done bool
	o    *boot.Outcome
}

func (b *bootState) finish(o *boot.Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.o = true, o
}

func (b *bootState) get() (*boot.Outcome, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.o, b.done
}

// serveUpgrade answers upgrade requests on l for the daemon's life:
// "still booting" until the boot sequence is done, then the upgrade's
// requests, or that this box takes none (no slots, no data partition).
func serveUpgrade(l net.Listener, st *bootState, console io.Writer) {
	busy := make(chan struct{}, 1)
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		o, done := st.get()
		switch {
		case !done:
			fmt.Fprintf(conn, "error %s: its boot sequence is not done yet (the self-test runs); try again in a moment\n", upgrade.StillBooting)
			conn.Close()
			continue
		case o == nil || o.Upgrade == nil:
			fmt.Fprintln(conn, "error the firmware's daemon takes no upgrade here: no slots on this card, or no data partition")
			conn.Close()
			continue
		}
		go func() {
			defer conn.Close()
			select {
			case busy <- struct{}{}:
				defer func() { <-busy }()
			default:
				fmt.Fprintln(conn, "error another upgrade is being received")
				return
			}
			if handleUpgrade(o, conn, console) {
				conn.Close()                // the answer is whole: ocf upgrade receive ends
				time.Sleep(2 * time.Second) // and its SSH session with it
				resetBoard(o, console, "booting the new system once")
			}
		}()
	}
}

// handleUpgrade serves one request; true means reset the board.
func handleUpgrade(o *boot.Outcome, conn net.Conn, console io.Writer) bool {
	u := o.Upgrade.Board
	br := bufio.NewReader(conn)
	first, err := br.ReadString('\n')
	if err != nil {
		fmt.Fprintf(conn, "error reading the request: %v\n", err)
		return false
	}
	if strings.TrimSpace(first) == "status" {
		fmt.Fprintf(conn, "board %s\nslot %s\nrevision %s\n", u.Name, u.Booted, u.Revision())
		if r, _ := u.Record(); r != nil {
			fmt.Fprintf(conn, "last %s\n", r.Message())
		}
		fmt.Fprintln(conn, "ok")
		return false
	}
	h, err := upgrade.ReadHeader(io.MultiReader(strings.NewReader(first), br))
	if err != nil {
		fmt.Fprintf(conn, "error %v\n", err)
		return false
	}
	fmt.Fprintf(conn, "receiving %s for %s (kernel %d bytes, initramfs %d bytes)\n", h.Revision, h.Board, h.Kernel.Size, h.Initrd.Size)
	rec, err := u.Receive(h, br, o.Tally())
	if err != nil {
		fmt.Fprintf(conn, "error %v\n", err)
		fmt.Fprintf(console, "ocfw: upgrade refused or failed: %v\n", err)
		return false
	}
	fmt.Fprintf(conn, "written to slot %s and verified (sha256)\nok %s; the board resets into it now\n", rec.Slot, rec.Message())
	return true
}

// resetBoard flushes the card's log and resets.
func resetBoard(o *boot.Outcome, console io.Writer, why string) {
	fmt.Fprintf(console, "ocfw: resetting: %s\n", why)
	if o.Log != nil {
		o.Log.Close()
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART); err != nil {
		fmt.Fprintf(console, "ocfw: reset: %v\n", err)
	}
}

// proveUpgrade runs on a new system's one-time boot, once its boot
// sequence is done: a pass commits the slot and stops the trial's
// watchdog (boot.Watchdog; the boot sequence armed it), anything else
// resets the board into the old default, with the watchdog still petted
// as a backstop for that reset.
func proveUpgrade(o *boot.Outcome, console io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := o.Upgrade.Prove(ctx, o, &boot.Config{})
	if err != nil {
		fmt.Fprintf(console, "ocfw: the new system failed its trial: %v\n", err)
		resetBoard(o, console, "back to the old system")
		return
	}
	if w := o.Upgrade.Watchdog; w != nil {
		if err := w.Disarm(); err != nil {
			fmt.Fprintf(console, "ocfw: %v\n", err)
		} else {
			fmt.Fprintln(console, "ocfw: upgrade trial over: watchdog stopped")
		}
	}
	fmt.Fprintf(console, "ocfw: %s\n", o.Upgrade.Message)
}
