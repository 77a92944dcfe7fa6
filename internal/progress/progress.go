// Package progress shows that a long step is alive: while it runs, a
// line every few seconds with the step and the time so far, e.g.
//
//	ocfw: building the Go userland (GOARCH=386 GO386=softfloat) ... 30s
//
// Callers pass a writer only when a person watches (stderr is a
// terminal); with a nil writer nothing is printed and nothing runs.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Every is how often Start prints.
const Every = 10 * time.Second

// Start prints "ocfw: what ... ELAPSED" to w every Every until the
// returned stop is called; stop waits until nothing more is printed. A
// nil w prints nothing.
func Start(w io.Writer, what string) (stop func()) {
	return StartStatus(w, what, nil)
}

// StartStatus is Start with status's words after the time on each line
// ("ocfw: fetching X ... 20s, 12.5 MB so far"): how far a step that can
// say so has got. A nil status says nothing more.
func StartStatus(w io.Writer, what string, status func() string) (stop func()) {
	if w == nil {
		return func() {}
	}
	t := time.NewTicker(Every)
	end := run(w, what, status, time.Now(), t.C)
	return func() { end(); t.Stop() }
}

// run prints one line for each tick, with the tick's time since start.
func run(w io.Writer, what string, status func() string, start time.Time, ticks <-chan time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case now := <-ticks:
				more := ""
				if status != nil {
					if st := status(); st != "" {
						more = ", " + st
					}
				}
				fmt.Fprintf(w, "ocfw: %s ... %v%s\n", what, now.Sub(start).Round(time.Second), more)
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}
}

// Terminal returns w when it is a terminal, where progress lines help a
// person waiting, and nil otherwise (a log file or a pipe, which should
// get only the step lines).
func Terminal(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return w
	}
	return nil
}
