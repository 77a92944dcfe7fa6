package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/boot"
	"github.com/ocfw/ocfw/plan"
)

// bootBackstop ends `ocf boot` whatever happens, so that u-root's init
// goes on to start the shell on the console.
const bootBackstop = 10 * time.Minute

// doneLine is what the daemon writes on its status pipe (fd 3) once the
// boot sequence is done.
const doneLine = "done"

// newBootCmd builds `boot`, the firmware's boot sequence (u-root runs it
// as uinit, then the shell).
func newBootCmd() *cobra.Command {
	var root string
	var noMount, foreground bool
	cmd := &cobra.Command{
		Use:   "boot",
		Short: "The firmware's boot sequence: storage, drivers, the network, self-test, speed, the report",
		Long: `boot runs once at every boot, before the shell. It starts the firmware's one
long-running process (` + "`ocf daemon`" + `) and waits until that has done the boot
sequence: mount proc, sys and devtmpfs; read ` + plan.File + ` and
` + plan.OptionsFile + `; find the data partition by its FAT label and open its
power-safe store (never mounting it) and take the boot number; load the plan's
kernel modules; bring the network up from the site config (the copy on the data
partition wins when valid); self-test every engine, measure them within the speed
budget, derive the policy; keep the report on the data partition or, without
one, in ` + plan.RunDir + `. Then boot exits so init starts the shell, and the daemon
goes on routing. Every step is time-bounded; boot always exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if noMount || foreground {
				runSequence(out, root, !noMount)
				return nil
			}
			if err := boot.ReleaseConsole(); err != nil {
				fmt.Fprintf(out, "ocfw: %v\n", err)
			}
			if err := startDaemon(out); err != nil {
				// The sequence must still run: do it here, without a router
				// that outlives it.
				fmt.Fprintf(out, "ocfw: starting the daemon: %v; running the boot sequence in the foreground\n", err)
				runSequence(out, root, true)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", "/", "file system root to work under (testing)")
	cmd.Flags().BoolVar(&noMount, "no-mount", false, "mount nothing, run in the foreground (testing)")
	cmd.Flags().BoolVar(&foreground, "foreground", false, "run the sequence in this process and return (no router afterwards)")
	return cmd
}

// startDaemon runs `ocf daemon` in a session of its own and waits until it
// says the boot sequence is done (or dies, or the backstop passes).
func startDaemon(out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// u-root's init hands us its console through pipes it copies from
	// (its multi-console output); a daemon that outlives us writes to the
	// console device itself, so its output and its life do not hang on
	// that copy.
	if con, err := openConsole(); err == nil {
		defer con.Close()
		out = con
	}
	if err := os.WriteFile(fatalSignalTrace, []byte("1\n"), 0o644); err != nil {
		fmt.Fprintf(out, "ocfw: %v: a process a signal kills leaves no trace in the kernel log\n", err)
	}
	// u-root's busybox dispatches on argv[0].
	return superviseDaemon(out, self, []string{"ocf", "daemon"}, bootBackstop)
}

// fatalSignalTrace makes the kernel log every process a signal kills
// (SIGILL, SIGSEGV...) with its registers and the code at its program
// counter. A Go program killed so, rather than dying of a Go panic, says
// nothing itself: the signal came while the runtime's handler could not
// run. The kernel's words are then all the report can show.
const fatalSignalTrace = "/proc/sys/kernel/print-fatal-signals"

// openConsole opens the kernel's console for writing, without making it
// anyone's controlling terminal.
func openConsole() (*os.File, error) {
	fd, err := unix.Open("/dev/console", unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/console"), nil
}

// superviseDaemon starts path with args (args[0] the name it sees) and
// its status pipe on fd 3, and returns once the daemon has written the
// done line. A daemon that ends first is a bug the user must hear of: its
// exit status and the kernel's last words go on the console, and the
// done marker after them, since no one else will print it.
func superviseDaemon(out io.Writer, path string, args []string, backstop time.Duration) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	c := exec.Command(path, args[1:]...)
	c.Args[0] = args[0]
	c.Stdout, c.Stderr = out, out
	c.ExtraFiles = []*os.File{w}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }() // reaps it; init adopts it once we exit
	done := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			if s.Text() == doneLine {
				done <- true
				return
			}
		}
		done <- false // the pipe closed: the daemon (and all it started) ended
	}()
	select {
	case ok := <-done:
		if ok {
			return nil
		}
		var status error
		select {
		case status = <-exited:
		case <-time.After(2 * time.Second):
			status = errors.New("closed its status pipe and is still running")
		}
		if status == nil {
			status = errors.New("exit status 0")
		}
		fmt.Fprintf(out, "%s (%v); the router is not running. The kernel's last messages:\n", plan.MarkDaemonDied, status)
		// 40: a fatal signal's trace (fatalSignalTrace) is about 20 lines.
		for _, l := range kernelLogTail(40) {
			fmt.Fprintf(out, "  %s\n", l)
		}
		fmt.Fprintf(out, "%s\n", plan.MarkDone)
	case <-time.After(backstop):
		fmt.Fprintf(out, "ocfw: boot sequence still running after %v: giving up\n%s\n", backstop, plan.MarkDone)
	}
	return nil
}

// kernelLogTail is the kernel log's last n lines (none when it cannot be
// read): the reason a process died silently, such as the OOM killer, is
// there, below the console's log level.
func kernelLogTail(n int) []string {
	size, err := unix.Klogctl(unix.SYSLOG_ACTION_SIZE_BUFFER, nil)
	if err != nil || size <= 0 {
		return nil
	}
	buf := make([]byte, size)
	m, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil || m <= 0 {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(buf[:m]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// runSequence runs the boot sequence with its backstop and returns the
// outcome (nil when it did not finish).
func runSequence(out io.Writer, root string, mount bool) *boot.Outcome {
	ch := make(chan *boot.Outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(out, "ocfw: boot sequence panicked: %v\n%s\n", p, plan.MarkDone)
				ch <- nil
			}
		}()
		ch <- boot.Run(context.Background(), boot.Config{Root: root, Console: out, Mount: mount})
	}()
	select {
	case o := <-ch:
		return o
	case <-time.After(bootBackstop):
		fmt.Fprintf(out, "ocfw: boot sequence still running after %v: giving up\n%s\n", bootBackstop, plan.MarkDone)
		return nil
	}
}

// newDaemonCmd builds `daemon`: the boot sequence, then the router for
// as long as the board runs.
func newDaemonCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "daemon",
		Short:  "The firmware's long-running process (started by ocf boot)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A console that goes away (a closed pipe) costs the console
			// lines, never the router: writes then fail instead of
			// killing the process.
			signal.Ignore(syscall.SIGPIPE)
			out := cmd.OutOrStdout()
			st := &bootState{}
			if l, err := listenUpgrade(upgradeSocket); err != nil {
				fmt.Fprintf(out, "ocfw: upgrade: %v\n", err)
			} else {
				go serveUpgrade(l, st, out)
			}
			o := runSequence(out, "/", true)
			st.finish(o)
			if f := os.NewFile(3, "status"); f != nil {
				fmt.Fprintln(f, doneLine)
				f.Close()
			}
			if o != nil && o.Upgrade != nil {
				if o.Upgrade.Trial() && o.Router == nil {
					proveUpgrade(o, out) // fails: no SSH without the router; resets
				} else if o.Upgrade.Trial() {
					go proveUpgrade(o, out)
				}
			}
			if o == nil || o.Router == nil {
				return nil
			}
			// The router runs until the board stops.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			s := <-sig
			if o.Log != nil {
				// Said on the card: this boot ended by a clean stop
				// (ocf reboot, ocf poweroff), not a power cut.
				o.Log.Add(fmt.Sprintf("ocfw: %v: stopping the router", s))
			}
			o.Router.Close()
			if o.Log != nil {
				// What the card's log holds in RAM goes to the card
				// before the board goes down.
				o.Log.Close()
			}
			return nil
		},
	}
}
