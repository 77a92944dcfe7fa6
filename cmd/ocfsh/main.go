// Command ocfsh is the firmware's shell, on the serial console and in SSH
// sessions: mvdan.cc/sh's POSIX shell interpreter (the one u-root's gosh
// runs) with a line editor and history from golang.org/x/term.
//
// gosh cannot be that shell: built small (goshsmall) it reads lines with
// no editor at all, so an arrow key runs "\x1b[A"; its two editors both
// fail on the console, where u-root's init hands the shell a pipe for
// stdout (its multi-console writer) and a serial port reports 0 columns:
// liner then gives up editing, and bubbline is a full-screen program.
// Here the editor reads the terminal on stdin, writes to stdout whatever
// it is (so its echo stays in order with the commands' output through
// init's pipe), assumes 80 columns when the terminal does not say, and
// leaves the terminal's output processing alone.
//
//	ocfsh            a shell: with a line editor when stdin is a terminal
//	ocfsh -c CMD     run CMD (what SSH exec requests run)
//	ocfsh FILE ARGS  run a script
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// prelude defines the admin's words that are not commands of their own:
// `reboot` is the clean restart of `ocf reboot` (the router flushes the
// card's log and stops first), not the kernel's bare restart; `head -N`
// is `head -n N`, which is all u-root's head takes (Go flags: "-5" is an
// unknown flag there).
const prelude = `reboot() { ocf reboot "$@"; }
head() {
	case "$1" in -[0-9]*) _n=${1#-}; shift; set -- -n "$_n" "$@"; unset _n;; esac
	command head "$@"
}
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the shell with args; it returns the exit status.
func run(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ocfsh", flag.ContinueOnError)
	fs.SetOutput(stderr)
	command := fs.String("c", "", "run `COMMAND` and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r, err := interp.New(interp.StdIO(stdin, stdout, stderr), interp.Params(append([]string{"--"}, tail(fs.Args())...)...))
	if err != nil {
		fmt.Fprintln(stderr, "ocfsh:", err)
		return 1
	}
	ctx := context.Background()
	if pre, err := syntax.NewParser().Parse(strings.NewReader(prelude), "prelude"); err != nil {
		fmt.Fprintln(stderr, "ocfsh: prelude:", err)
	} else {
		runStmts(ctx, r, pre)
	}
	switch {
	case *command != "":
		err = runSource(ctx, r, strings.NewReader(*command), "")
	case fs.NArg() > 0:
		var f *os.File
		if f, err = os.Open(fs.Arg(0)); err == nil {
			err = runSource(ctx, r, f, fs.Arg(0))
			f.Close()
		}
	case term.IsTerminal(int(stdin.Fd())):
		err = interactive(ctx, r, stdin, stdout, stderr)
	default:
		err = runSource(ctx, r, stdin, "")
	}
	return status(err, stderr)
}

// tail is a script's arguments ($1...): all but the script itself.
func tail(args []string) []string {
	if len(args) < 2 {
		return nil
	}
	return args[1:]
}

func runSource(ctx context.Context, r *interp.Runner, src io.Reader, name string) error {
	prog, err := syntax.NewParser().Parse(src, name)
	if err != nil {
		return err
	}
	return r.Run(ctx, prog)
}

// status is the exit status for err, which it prints unless it is a
// plain exit status.
func status(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if st, ok := interp.IsExitStatus(err); ok {
		return int(st)
	}
	fmt.Fprintln(stderr, "ocfsh:", err)
	return 1
}

// interactive reads commands with the line editor until exit or ^D.
func interactive(ctx context.Context, r *interp.Runner, stdin *os.File, stdout, stderr io.Writer) error {
	// ^C and ^\ while a command runs are for the command (the shell
	// shares its process group): noticed here, they are not ignored in
	// what the shell starts.
	// A command ended by ^C leaves the cursor after the terminal's "^C":
	// the prompt then starts a line of its own.
	var signalled atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(sig)
	go func() {
		for range sig {
			signalled.Store(true)
		}
	}()
	ed := newEditor(int(stdin.Fd()), stdin, stdout)
	// No job control here: ^Z would stop the shell with the command
	// (they share a process group) and nothing could resume them. The
	// terminal's suspend key is off while the shell runs.
	if t, err := unix.IoctlGetTermios(ed.fd, unix.TCGETS); err == nil && t.Cc[unix.VSUSP] != 0 {
		was := t.Cc[unix.VSUSP]
		t.Cc[unix.VSUSP] = 0
		if unix.IoctlSetTermios(ed.fd, unix.TCSETS, t) == nil {
			defer func() {
				if t, err := unix.IoctlGetTermios(ed.fd, unix.TCGETS); err == nil {
					t.Cc[unix.VSUSP] = was
					unix.IoctlSetTermios(ed.fd, unix.TCSETS, t)
				}
			}()
		}
	}
	host, _ := os.Hostname()
	var src strings.Builder
	for {
		prompt := host + ":" + r.Dir + "# "
		if src.Len() > 0 {
			prompt = "> "
		}
		if signalled.Swap(false) {
			io.WriteString(stdout, "\r\n")
		}
		line, err := ed.readLine(prompt)
		if errors.Is(err, errInterrupted) {
			src.Reset()
			continue
		}
		if err != nil {
			if err == io.EOF {
				io.WriteString(stdout, "\r\n")
				return nil
			}
			return err
		}
		src.WriteString(line)
		src.WriteByte('\n')
		prog, err := syntax.NewParser().Parse(strings.NewReader(src.String()), "")
		if syntax.IsIncomplete(err) {
			continue
		}
		src.Reset()
		if err != nil {
			fmt.Fprintln(stderr, "ocfsh:", err)
			continue
		}
		err, exited := runStmts(ctx, r, prog)
		if exited {
			return err
		}
		if _, ok := interp.IsExitStatus(err); err != nil && !ok {
			fmt.Fprintln(stderr, "ocfsh:", err)
		}
	}
}

// runStmts runs prog's statements one by one, as typed lines (running a
// whole File would end the shell, as a script ends). exited says the
// shell is to end, with err's status.
func runStmts(ctx context.Context, r *interp.Runner, prog *syntax.File) (err error, exited bool) {
	for _, st := range prog.Stmts {
		err = r.Run(ctx, st)
		if r.Exited() {
			return err, true
		}
	}
	return err, false
}

// errInterrupted is a line given up with ^C.
var errInterrupted = errors.New("interrupted")

// editor is x/term's line editor on the terminal fd: VT100 keys (arrows,
// Home/End, ^A ^E ^B ^F ^K ^U ^W ^L, backspace), history on up/down and
// ^P/^N. Between lines the terminal is in its normal mode, so commands
// see the terminal as usual.
type editor struct {
	fd   int
	t    *term.Terminal
	keys *keyReader
	hist *history
}

func newEditor(fd int, in io.Reader, out io.Writer) *editor {
	k := &keyReader{r: in}
	h := &history{keys: k}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{k, out}, "")
	t.History = h
	return &editor{fd: fd, t: t, keys: k, hist: h}
}

// readLine reads one line with prompt. io.EOF is ^D on an empty line
// (or the terminal gone); errInterrupted is ^C.
func (e *editor) readLine(prompt string) (string, error) {
	if ws, err := unix.IoctlGetWinsize(e.fd, unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
		e.t.SetSize(int(ws.Col), int(ws.Row))
	}
	restore, err := lineMode(e.fd)
	if err != nil {
		return "", err
	}
	defer restore()
	e.t.SetPrompt(prompt)
	line, err := e.t.ReadLine()
	if e.keys.interrupted {
		e.keys.interrupted = false
		return "", errInterrupted
	}
	return line, err
}

// lineMode sets the terminal for the editor: no canonical input, echo or
// signal keys (the editor handles each key), no flow control; output
// processing stays as it is, so lines that other writers still send to
// the terminal (command output on its way through init's pipe) keep
// their carriage returns. The returned func puts the terminal back.
func lineMode(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG | unix.IEXTEN
	t.Iflag &^= unix.ICRNL | unix.IXON | unix.INLCR | unix.IGNCR
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// ctrlC ends a line without running it. x/term's editor takes ^C for end
// of input, as ^D; keyReader turns it into "end of line, show ^C,
// enter" and marks the line interrupted, so the shell drops it (and its
// history entry) and prompts again.
const ctrlC = 3

var interruptKeys = []byte("\x05^C\r")

// keyReader is the editor's input: the terminal's bytes with ^C
// rewritten (see ctrlC).
type keyReader struct {
	r           io.Reader
	buf         []byte // rewritten bytes not yet read
	err         error
	interrupted bool
}

func (k *keyReader) Read(p []byte) (int, error) {
	if len(k.buf) == 0 {
		if k.err != nil {
			return 0, k.err
		}
		b := make([]byte, max(len(p), 64))
		n, err := k.r.Read(b)
		k.err = err
		b = b[:n]
		if i := bytes.IndexByte(b, ctrlC); i >= 0 {
			k.interrupted = true
			rest := append([]byte(nil), b[i+1:]...)
			b = append(append(b[:i:i], interruptKeys...), rest...)
		}
		k.buf = b
		if len(b) == 0 {
			return 0, err
		}
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}

// maxHistory bounds the history kept in a session.
const maxHistory = 500

// history is the editor's: newest first, no empty lines, no repeat of
// the line just before, nothing of an interrupted line.
type history struct {
	lines []string // oldest first
	keys  *keyReader
}

func (h *history) Add(line string) {
	if h.keys.interrupted || strings.TrimSpace(line) == "" || (len(h.lines) > 0 && h.lines[len(h.lines)-1] == line) {
		return
	}
	if len(h.lines) == maxHistory {
		h.lines = append(h.lines[:0], h.lines[1:]...)
	}
	h.lines = append(h.lines, line)
}

func (h *history) Len() int { return len(h.lines) }

func (h *history) At(i int) string { return h.lines[len(h.lines)-1-i] }
