package sshd

import (
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// drainGrace is how long output is still relayed after the session's
// process has ended: what it left in the pipe or pty comes at once, and
// this only bounds a background child that keeps the output open.
const drainGrace = time.Second

// SubsystemHint is what a client asking for a subsystem other than sftp
// sees on its stderr.
const SubsystemHint = "ocfw: this router offers the sftp subsystem only (scp and sftp use it)\r\n"

// session is one "session" channel: at most one process, started by the
// first shell or exec request.
type session struct {
	srv  *Server
	ch   ssh.Channel
	conn string // connID of the connection it is on

	term    string
	size    *unix.Winsize // from pty-req; nil means pipes, no pty
	ptmx    *os.File
	cmd     *exec.Cmd
	started bool
	replied chan struct{} // closed once the start request is answered

	mu     sync.Mutex
	exited bool // the process has ended: its group may no longer be ours to signal
}

// Request payloads (RFC 4254 section 6).
type ptyReq struct {
	Term             string
	Cols, Rows, W, H uint32
	Modes            string
}

type winChange struct{ Cols, Rows, W, H uint32 }

type exitStatus struct{ Status uint32 }

type exitSignal struct {
	Signal     string
	CoreDumped bool
	Error      string
	Lang       string
}

// signals are those a client may send (RFC 4254 section 6.10).
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2, "ALRM": syscall.SIGALRM, "PIPE": syscall.SIGPIPE,
}

func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request, addr, conn string) {
	ss := &session{srv: s, ch: ch, replied: make(chan struct{}), conn: conn}
	for req := range reqs {
		ok := false
		switch req.Type {
		case "pty-req":
			var p ptyReq
			if !ss.started && ssh.Unmarshal(req.Payload, &p) == nil {
				ss.term = p.Term
				ss.size = winsize(p.Cols, p.Rows, p.W, p.H)
				ok = true
			}
		case "window-change":
			var w winChange
			if ssh.Unmarshal(req.Payload, &w) == nil && ss.size != nil {
				ss.size = winsize(w.Cols, w.Rows, w.W, w.H)
				ok = ss.resize() == nil
			}
		case "shell", "exec":
			var e struct{ Command string }
			if ss.started || req.Type == "exec" && ssh.Unmarshal(req.Payload, &e) != nil {
				break
			}
			if err := ss.start(req.Type == "exec", e.Command); err != nil {
				s.logf("ssh: %s: cannot start %s: %v", addr, s.cfg.Shell, err)
				// The client says "exec request failed"; nothing
				// more will happen on this channel.
				req.Reply(false, nil)
				ch.Close()
				continue
			}
			// The reply goes before the exit status and the close: a
			// command that ends at once must not close the channel
			// first (the client would see end of file, no status).
			if req.WantReply {
				req.Reply(true, nil)
			}
			close(ss.replied)
			continue
		case "signal":
			var sig struct{ Name string }
			if ssh.Unmarshal(req.Payload, &sig) == nil && ss.cmd != nil {
				if n, known := signals[sig.Name]; known {
					ok = ss.cmd.Process.Signal(n) == nil
				}
			}
		case "subsystem":
			if ss.started {
				break
			}
			var sub struct{ Name string }
			ssh.Unmarshal(req.Payload, &sub)
			if sub.Name == "sftp" {
				ss.started = true // and ss.cmd stays nil
				if req.WantReply {
					req.Reply(true, nil)
				}
				go func() {
					if err := s.serveSFTP(ch, addr); err != nil {
						s.logf("ssh: %s: sftp: %v", addr, err)
					}
					ch.CloseWrite()
					ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{}))
					ch.Close()
				}()
				continue
			}
			// Any other: a client told "subsystem request failed"
			// shows nothing more, so the request is taken and the
			// session ends at once with the hint on its stderr,
			// which OpenSSH's ssh prints.
			s.logf("ssh: %s: refused subsystem %q", addr, sub.Name)
			ss.started = true // and ss.cmd stays nil
			if req.WantReply {
				req.Reply(true, nil)
			}
			io.WriteString(ch.Stderr(), SubsystemHint)
			ch.CloseWrite()
			ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: 1}))
			ch.Close()
			continue
		}
		// env, x11-req, auth-agent-req@openssh.com and the rest: refused.
		if req.WantReply {
			req.Reply(ok, nil)
		}
	}
	// The channel is closed: by us once the process ended, or by the
	// client (or the connection) while it runs, which hangs it up.
	ss.hangup()
}

func winsize(cols, rows, w, h uint32) *unix.Winsize {
	c16 := func(v uint32) uint16 { return uint16(min(v, 0xffff)) }
	return &unix.Winsize{Col: c16(cols), Row: c16(rows), Xpixel: c16(w), Ypixel: c16(h)}
}

// resize sets the pty's size: through the descriptor's raw access, as
// File.Fd would put the master back into blocking mode and stop its
// deadlines working.
func (ss *session) resize() error {
	if ss.ptmx == nil {
		return nil // not started yet: start uses ss.size
	}
	rc, err := ss.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ss.size)
	}); err != nil {
		return err
	}
	return ierr
}

// start runs the shell, with the pty if the client asked for one, with
// pipes otherwise, in a new process group (a new session with a pty) so
// that hangup reaches what the shell started too.
func (ss *session) start(isExec bool, command string) error {
	cfg := ss.srv.cfg
	args := []string{cfg.Shell}
	if isExec {
		args = append(args, "-c", command)
	}
	cmd := &exec.Cmd{Path: cfg.Shell, Args: args, Dir: "/", Env: append([]string(nil), cfg.Env...)}
	cmd.Env = append(cmd.Env, ConnEnv+"="+ss.conn)
	var (
		outs   []*os.File  // what the process writes, in the order relayed
		to     []io.Writer // where each goes
		in     *os.File    // what it reads, fed from the channel
		closeC []*os.File  // the child's ends, closed once it has them
	)
	if ss.size != nil {
		if ss.term != "" {
			cmd.Env = append(cmd.Env, "TERM="+ss.term)
		}
		master, tty, err := pty.Open()
		if err != nil {
			return err
		}
		m, err := pollable(master)
		if err != nil {
			tty.Close()
			return err
		}
		ss.ptmx = m
		if err := ss.resize(); err != nil {
			m.Close()
			tty.Close()
			return err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		outs, to, in, closeC = []*os.File{m}, []io.Writer{ss.ch}, m, []*os.File{tty}
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW)
			return err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW, outR, outW)
			return err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		outs, to, in, closeC = []*os.File{outR, errR}, []io.Writer{ss.ch, ss.ch.Stderr()}, inW, []*os.File{inR, outW, errW}
	}
	hangupsReachChildren()
	err := cmd.Start()
	closeAll(closeC...)
	if err != nil {
		closeAll(outs...)
		closeAll(in)
		return err
	}
	ss.cmd, ss.started = cmd, true

	// Input: the client's EOF closes the pipe (the pty has no EOF to
	// pass on: ^D is the user's). The copy ends at the latest when the
	// channel closes.
	go func() {
		io.Copy(in, ss.ch)
		if ss.size == nil {
			in.Close()
		}
	}()
	var copies sync.WaitGroup
	for i, f := range outs {
		copies.Add(1)
		go func() {
			defer copies.Done()
			// A pty master reads EIO once the last tty holder is
			// gone: that is its end of file.
			io.Copy(to[i], f)
		}()
	}
	go func() {
		ss.waitExit()
		for _, f := range outs {
			f.SetReadDeadline(time.Now().Add(drainGrace))
		}
		copies.Wait()
		closeAll(outs...)
		if ss.size == nil {
			in.Close() // the pty master is in outs
		}
		<-ss.replied
		ss.ch.CloseWrite()
		ss.ch.SendRequest(exitRequest(cmd.ProcessState))
		ss.ch.Close()
	}()
	return nil
}

// waitExit waits for the process to end and reaps it. It first waits
// without reaping (waitid WNOWAIT) and marks the session exited under
// the lock: until the zombie is reaped its pid, which is the group's id,
// cannot be reused, so hangup never signals a stranger's group.
func (ss *session) waitExit() {
	pid := ss.cmd.Process.Pid
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	ss.mu.Lock()
	ss.exited = true
	ss.mu.Unlock()
	ss.cmd.Wait()
}

// hupSink takes the SIGHUPs hangupsReachChildren catches; nothing reads
// it (a full channel drops them): this process goes on as if it ignored
// them.
var hupSink = make(chan os.Signal, 1)

// hangupsReachChildren makes sure a session's process starts with
// SIGHUP's default action, which ends it. A signal this process ignores
// stays ignored in every process it starts (an ignored disposition
// survives exec), and the board's router starts so: `ocf boot` ignores
// SIGHUP while it gives up the console, then starts the daemon. Caught
// instead (Go's handler, which exec resets to the default), SIGHUP still
// does nothing to this process, and hangup ends what a client left. The
// kernel's word, not signal.Ignored's: after signal.Reset of a signal
// ignored from the start, Go says not ignored while the kernel still
// ignores it.
func hangupsReachChildren() {
	if signal.Ignored(syscall.SIGHUP) || kernelIgnores(syscall.SIGHUP) {
		signal.Notify(hupSink, syscall.SIGHUP)
	}
}

// kernelIgnores reads the SigIgn mask of /proc/self/status.
func kernelIgnores(sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// hangup sends SIGHUP to the process group of a session whose client is
// gone, as a terminal hang-up would; what ignores it is left running and
// reaped when it ends.
func (ss *session) hangup() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.cmd != nil && !ss.exited {
		syscall.Kill(-ss.cmd.Process.Pid, syscall.SIGHUP)
		if ss.ptmx != nil {
			// Closing the master is the terminal's own hang-up:
			// the kernel signals the session and the tty's
			// readers see end of file.
			ss.ptmx.Close()
		}
	}
}

func exitRequest(st *os.ProcessState) (string, bool, []byte) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if len(name) > 3 {
			name = name[3:] // "SIGTERM" -> "TERM"
		}
		return "exit-signal", false, ssh.Marshal(exitSignal{Signal: name, CoreDumped: ws.CoreDump()})
	}
	return "exit-status", false, ssh.Marshal(exitStatus{Status: uint32(st.ExitCode())})
}

// pollable turns the pty master into a non-blocking, poller-managed file
// (creack/pty leaves it blocking), so deadlines work on its reads.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// ConnEnv names the variable that tells a session's process which SSH
// connection it runs on (connID): `ocf config confirm` must come over
// another connection than the one that applied the config, which proves
// a new login still works. Clients cannot set it (env requests are
// refused).
const ConnEnv = "OCFW_SSH_CONN"

// connID tells connections apart: the first 8 bytes of the session
// identifier, which both ends derive from the key exchange.
func connID(c ssh.ConnMetadata) string { return hex.EncodeToString(c.SessionID()[:8]) }
