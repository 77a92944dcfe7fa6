package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// stopGrace bounds the wait for the daemon to stop: it closes the
// router's services and writes the log lines it holds to the card.
const stopGrace = 20 * time.Second

// shutdown is how a clean restart or power-off is done; tests replace
// the parts that would act on the machine.
type shutdown struct {
	proc   string // /proc
	signal func(pid int, sig syscall.Signal) error
	sync   func()
	reboot func(cmd int) error
	grace  time.Duration
	out    io.Writer
}

func realShutdown(out io.Writer) *shutdown {
	return &shutdown{proc: "/proc", signal: syscall.Kill, sync: unix.Sync, reboot: unix.Reboot, grace: stopGrace, out: out}
}

// newRebootCmd builds `reboot` and `poweroff`: the daemon (the router)
// is told to stop as at any shutdown (SIGTERM: it stops its services
// and writes the card's log lines held in RAM), the kernel's buffers are
// flushed, and only then does the kernel restart or power off. u-root's
// own poweroff and `shutdown reboot` skip all that.
func newRebootCmd(name string, cmd int) *cobra.Command {
	verb := map[string]string{"reboot": "Restart", "poweroff": "Power off"}[name]
	return &cobra.Command{
		Use:   name,
		Short: verb + " the board cleanly: the router stops and the card's log is written first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// Run over SSH, this process outlives the session: the
			// router it stops closes the connection, which hangs
			// up the session's processes and leaves their output
			// nowhere.
			signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
			return realShutdown(c.OutOrStdout()).run(name, cmd)
		},
	}
}

func (s *shutdown) run(name string, cmd int) error {
	pids := daemonPIDs(s.proc)
	for _, pid := range pids {
		fmt.Fprintf(s.out, "ocf %s: stopping the router (pid %d) and writing its log to the card\n", name, pid)
		if err := s.signal(pid, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("stopping the router (pid %d): %w", pid, err)
		}
	}
	deadline := time.Now().Add(s.grace)
	for _, pid := range pids {
		for running(s.proc, pid) {
			if time.Now().After(deadline) {
				fmt.Fprintf(s.out, "ocf %s: the router (pid %d) is still running after %v; going on\n", name, pid, s.grace)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	s.sync()
	fmt.Fprintf(s.out, "ocf %s: now\n", name)
	return s.reboot(cmd)
}

// daemonPIDs are the processes that run `ocf daemon` (u-root's busybox
// gives it that argv), read from the proc file system at proc.
func daemonPIDs(proc string) []int {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) >= 2 && filepath.Base(args[0]) == "ocf" && args[1] == "daemon" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// running says pid has not ended: it exists and is no zombie.
func running(proc string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}
