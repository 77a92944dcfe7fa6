package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/boardvm"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/progress"
)

type runFlags struct {
	timeout     time.Duration
	timeoutSet  bool // --timeout given
	until       string
	poweroff    bool
	memoryMB    int
	quiet       bool
	persist     bool
	fresh       bool
	standInSaid bool // try told the user what the stand-in does not prove
	keepCopy    string
	force       bool // replace an existing --keep-copy file
	net         string
	sshPort     int
	ports       []string
}

// network turns --net, --ssh-port and --port into the wiring of the
// board's ports.
func (f *runFlags) network() (boardvm.Network, error) {
	n := boardvm.Network{SSHPort: f.sshPort, Ports: map[string]qemu.NIC{}}
	switch f.net {
	case "", "user":
	case "none":
		n.None = true
		if len(f.ports) > 0 {
			return n, fmt.Errorf("--net none and --port: give one or the other")
		}
	default:
		return n, fmt.Errorf("--net %q: want user (the default: QEMU's restricted user network on the WAN and the first LAN port) or none", f.net)
	}
	if f.sshPort < 0 || f.sshPort > 65535 {
		return n, fmt.Errorf("--ssh-port %d: want a port 1-65535, or 0 for none", f.sshPort)
	}
	for _, p := range f.ports {
		name, spec, ok := strings.Cut(p, "=")
		path, mode, _ := strings.Cut(spec, ",")
		if !ok || name == "" || path == "" || (mode != "" && mode != "listen") {
			return n, fmt.Errorf("--port %q: want NAME=SOCKET or NAME=SOCKET,listen (a unix socket shared with another VM's card), e.g. --port wan=/tmp/wan.sock,listen", p)
		}
		n.Ports[name] = qemu.NIC{Socket: path, Listen: mode == "listen"}
	}
	return n, nil
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run IMAGE",
		Short: "Boot a CF image (or an IXP4xx board's stand-in image) in QEMU, with its serial console here",
		Long: `run boots an x86 CF image (alix2d13, net5501) with qemu-system-i386 -M pc -cpu
pentium2 (no SSE2, like the Geode LX: a userland built without softfloat dies
here as it would on the board), the board's RAM and the image as the IDE disk.
The serial console is this terminal; on a terminal, Ctrl-A x ends the run. The
console takes input from a terminal only: with standard input a pipe or a file
the run shows the console but types nothing into it (log in over SSH instead).

QEMU has no IXP4xx machine: an nslu2 or avila-gw2348 image built with 'ocfw build
--stand-in' boots on qemu-system-arm -M raspi1ap with Debian armel's rpi kernel,
its device tree and the initramfs built beside the image, the image as the SD
card (its data partition). run first says what the stand-in does not prove and
prints the QEMU command line. The raspi machine emulates no Ethernet: the
board's ports become QEMU usb-net cards (CDC Ethernet) on a USB hub, in port
order, which the stand-in kernel names usb0, usb1... (the stand-in plan names
the ports so).

An x86 board's Ethernet ports become QEMU e1000 cards (QEMU has no VIA Rhine; x86
images carry the e1000 driver), in port order so the kernel names them as on the
board. On either, for an image built with --site: the WAN port is on QEMU's user network with
restrict=on (its DHCP server gives a DHCP WAN an address; nothing gets out), the
first LAN port on a restricted user network on the LAN's subnet, with
127.0.0.1:2222 on this host forwarded to the router's SSH (--ssh-port), and other
ports unplugged. --port NAME=SOCKET[,listen] wires a port to another VM's card over
a unix socket instead. No tap, no bridge, no unrestricted user network: guest
traffic never reaches this host's network.

The image stays as built, matching its manifest and sha256sums, ready for
'ocfw flash': run never writes it. The first run writes a card from it,
IMAGE.state beside the image (a sparse disk image of the whole card), and every
run of the image boots that card, as a board boots its CF card: what the board
wrote anywhere on it stays, the data partition (SSH host key, DHCP leases, boot
counter, reports, a pushed config) and the boot partition (an upgrade's slot).
'ocfw report IMAGE' reads the reports from it. A pushed config on the card is
what the router runs, not the image's own site config: the run's first line
says so. --fresh deletes the card and starts over from the image's own. When
the image was rebuilt since the card was written, run writes a new card from it
and carries the old card's data partition over (as writing a new image to a card
and keeping its data would), and says so.

A reset (reboot on the box, an upgrade's restart, the watchdog an upgrade's
trial arms) boots the card again in the same run; only a power-off ('ocf
poweroff', or Ctrl-A x) ends it. So 'ocfw upgrade' into a router under 'ocfw
run' commits as on the board, and the next run boots the new system.

--keep-copy FILE boots a copy of the image as built in FILE and keeps it (the
kept card IMAGE.state is neither booted nor changed; an existing file is
replaced only with --force; a device, FIFO or directory never). --persist boots
the image itself, as the board would; the image then no longer matches its
manifest.

With --poweroff-after-report the run types 'poweroff' once the firmware's boot
sequence is done, and the exit status is the self-test outcome read back from the
data partition: 0 when every present engine passed, 1 otherwise.

--timeout is a watchdog for scripted runs: a guest still running after it is
killed, and run prints the last console lines and then that the watchdog fired.
A run you work in (stdin and stdout a terminal, no --poweroff-after-report or
--until) has no watchdog unless --timeout is given. Sequences that would reset
or reconfigure your terminal (ESC c, auto-wrap off and other private modes,
clearing the screen) are not passed through; colours are.`,
		Example: `  ocfw run alix.img
  ocfw run --poweroff-after-report --timeout 10m alix.img
  ocfw run --poweroff-after-report --keep-copy booted.img alix.img && ocfw inspect booted.img
  ocfw run --persist alix.img        # reports accumulate in alix.img itself`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.timeoutSet = cmd.Flags().Changed("timeout")
			return runImage(cmd, args[0], f)
		},
	}
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Minute, "watchdog: end the run (with an error) when the guest is still running after this; 0 = none (the default when you run the guest at a terminal)")
	cmd.Flags().StringVar(&f.until, "until", "", "end the run when the console shows this text")
	cmd.Flags().BoolVar(&f.poweroff, "poweroff-after-report", false, "power off once the boot sequence is done and exit with the self-test outcome")
	cmd.Flags().IntVar(&f.memoryMB, "memory", 0, "guest RAM in MiB (default: the board's)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "do not copy the console here")
	cmd.Flags().BoolVar(&f.persist, "persist", false, "boot the image itself, not a copy: its report stays in the image, which then no longer matches its manifest")
	cmd.Flags().StringVar(&f.keepCopy, "keep-copy", "", "boot a copy of the image as built, written to this file, and keep it afterwards (the card kept in IMAGE.state is not booted)")
	cmd.Flags().BoolVar(&f.force, "force", false, "replace an existing --keep-copy file (a device, FIFO or directory never)")
	cmd.Flags().BoolVar(&f.fresh, "fresh", false, "start over from the image's own card (its own site config, no pushed config, slot a): delete the card kept from earlier runs (IMAGE.state)")
	cmd.MarkFlagsMutuallyExclusive("persist", "keep-copy")
	cmd.MarkFlagsMutuallyExclusive("persist", "fresh")
	cmd.MarkFlagsMutuallyExclusive("keep-copy", "fresh")
	registerNetFlags(cmd, f)
	return cmd
}

// rawTerminal puts a terminal in raw mode so keystrokes reach the guest
// as typed; it fails (and nothing changes) when f is not a terminal.
func rawTerminal(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// escapeReader passes keystrokes through and ends the run on Ctrl-A x,
// QEMU's own escape.
type escapeReader struct {
	r      io.Reader
	cancel func()
	ctrlA  bool
}

func (e *escapeReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	for i := 0; i < n; i++ {
		if e.ctrlA && (p[i] == 'x' || p[i] == 'X') {
			e.cancel()
			return 0, io.EOF
		}
		e.ctrlA = p[i] == 0x01
	}
	return n, err
}

// watchdog is the QEMU watchdog for a run (negative: none): --timeout as
// given, 0 meaning none; by default none for an interactive run, which a
// person ends, and the flag's default for a scripted one.
func watchdog(timeout time.Duration, set, interactive bool) time.Duration {
	switch {
	case set && timeout == 0:
		return -1
	case set:
		return timeout
	case interactive:
		return -1
	}
	return timeout
}

// runImage boots image in QEMU per f and turns the report into the exit
// status.
func runImage(cmd *cobra.Command, image string, f *runFlags) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	var escaped atomic.Bool
	netw, err := f.network()
	if err != nil {
		return err
	}
	if f.keepCopy != "" {
		if f.keepCopy, err = checkOut(f.keepCopy, "--keep-copy", f.force); err != nil {
			return err
		}
	}
	opt := boardvm.RunOptions{Timeout: f.timeout, Until: f.until, PoweroffAfterReport: f.poweroff, MemoryMB: f.memoryMB,
		Persist: f.persist, KeepCopy: f.keepCopy, Network: netw, StandInSaid: f.standInSaid,
		Log: func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "ocfw run: "+format+"\n", args...) }}
	if f.persist {
		fmt.Fprintf(cmd.ErrOrStderr(), "ocfw run: --persist: booting %s itself; the boot writes into it, so it will no longer match %s and sha256sums ('ocfw flash' refuses it)\n",
			image, firmware.ManifestPath(image))
	}
	if opt.Card, err = boardState(cmd.ErrOrStderr(), image, f); err != nil {
		return err
	}
	if opt.Card != nil {
		defer opt.Card.Close()
	}
	if !f.quiet {
		opt.Console = cmd.OutOrStdout()
	}
	interactive := false
	if in, ok := cmd.InOrStdin().(*os.File); ok && !f.poweroff && f.until == "" {
		if restore, err := rawTerminal(in); err == nil {
			defer restore()
			opt.Input = &escapeReader{r: in, cancel: func() { escaped.Store(true); cancel() }}
			interactive = progress.Terminal(cmd.OutOrStdout()) != nil
		}
	}
	opt.Timeout = watchdog(f.timeout, f.timeoutSet, interactive)
	opt.Script = routerUpScript(image, f, cmd.ErrOrStderr(), opt.Input != nil)
	res, err := boardvm.Run(ctx, image, opt)
	if opt.Console != nil && res != nil && res.Console != "" && !strings.HasSuffix(res.Console, "\n") {
		// What comes next (a message, the shell's prompt) starts on a
		// line of its own, not after the guest's prompt.
		fmt.Fprint(opt.Console, "\r\n")
	}
	if escaped.Load() {
		return nil // the user ended the run with Ctrl-A x
	}
	if err != nil {
		return err
	}
	if res.Report != nil && res.NewReport {
		where := "the image's data partition"
		switch {
		case res.State != "":
			where = "the card kept in " + res.State + " (the image is unchanged)"
		case res.Copy && f.keepCopy != "":
			where = "the data partition of the copy " + res.Booted
		case res.Copy:
			where = "the data partition of the copy booted (removed; the image is unchanged)"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "ocfw run: %s booted in %v; report of boot %d on %s: self-test %s\n",
			bootedName(res), res.Elapsed.Round(time.Second), res.Report.Boot, where, res.Report.Tally())
		if res.Report.Failed() {
			return fmt.Errorf("self-test failed on the board for %v: excluded by the policy (see the report)", res.Report.FailedEngines())
		}
	}
	return nil
}

func registerNetFlags(cmd *cobra.Command, f *runFlags) {
	cmd.Flags().StringVar(&f.net, "net", "user", "the board's ports: user (QEMU's user network with restrict=on on the WAN and the first LAN port, others unplugged) or none; guest traffic never reaches this host's network")
	cmd.Flags().IntVar(&f.sshPort, "ssh-port", 2222, "forward 127.0.0.1:PORT on this host to the router's SSH on its LAN address (0: none)")
	cmd.Flags().StringArrayVar(&f.ports, "port", nil, "wire a port to another VM: NAME=SOCKET[,listen], a unix socket (repeat)")
}
