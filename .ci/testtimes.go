// testtimes reads `go test -json` on its input and prints what go test
// prints without -v (each package's ok or FAIL line, build errors, and
// the whole output of every failed test), then where the suite's time
// went: every package's time, the tests that took a minute or more, and
// the wall time from the first event to the last. CI pipes the suite
// through it (.ci/run) so that each run reports the time the suite takes
// on CI's machine, and which package and test is its critical path.
//
//	go test -json ./... | go run .ci/testtimes.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (go doc test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type timing struct {
	name       string
	elapsed    float64
	start, end time.Time // a test's, when known
}

func main() {
	var (
		first, last time.Time
		packages    []timing
		tests       []timing
		failed      []string
		said        = map[string][]string{} // a failed test's log lines, first line of each
		held        = map[string][]string{} // a running test's output, printed if it fails
		// A test whose subtests run in parallel ends before they do
		// (its Elapsed is its own body's): its time is taken from its
		// start to its last subtest's end.
		started = map[string]time.Time{}
		ended   = map[string]time.Time{}
	)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Println(in.Text()) // not an event: go test's own complaint
			continue
		}
		if !e.Time.IsZero() {
			if first.IsZero() {
				first = e.Time
			}
			last = e.Time
		}
		key := e.Package + " " + e.Test
		top, _, _ := strings.Cut(e.Test, "/")
		topKey := e.Package + " " + top
		if e.Test != "" && (e.Action == "run" || e.Action == "cont") && top == e.Test {
			started[topKey] = e.Time // cont: the end of its pause as a parallel test
		}
		if e.Test != "" && (e.Action == "pass" || e.Action == "fail") && e.Time.After(ended[topKey]) {
			ended[topKey] = e.Time
		}
		switch {
		case e.Action == "build-output":
			fmt.Print(e.Output)
		case e.Test == "" && e.Action == "output":
			// The package's own lines: "ok ...", "FAIL ...", a panic.
			if !strings.HasPrefix(e.Output, "PASS\n") && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Print(e.Output)
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail"):
			packages = append(packages, timing{name: e.Package, elapsed: e.Elapsed})
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "pass" || e.Action == "skip":
			if e.Action == "pass" && !strings.Contains(e.Test, "/") {
				tests = append(tests, timing{short(e.Package) + " " + e.Test, e.Elapsed, started[key], ended[key]})
			}
			delete(held, key)
		case e.Action == "fail":
			fmt.Print(strings.Join(held[key], ""))
			said[short(e.Package)+" "+e.Test] = logLines(held[key])
			delete(held, key)
			failed = append(failed, short(e.Package)+" "+e.Test)
			if !strings.Contains(e.Test, "/") {
				tests = append(tests, timing{short(e.Package) + " " + e.Test + " (FAIL)", e.Elapsed, started[key], ended[key]})
			}
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes: reading go test -json:", err)
		os.Exit(1)
	}

	byTime := func(a, b timing) int {
		switch {
		case a.elapsed > b.elapsed:
			return -1
		case a.elapsed < b.elapsed:
			return 1
		}
		return strings.Compare(a.name, b.name)
	}
	for i, t := range tests {
		if span := t.end.Sub(t.start).Seconds(); !t.start.IsZero() && span > t.elapsed {
			tests[i].elapsed = span
		}
	}
	slices.SortFunc(packages, byTime)
	slices.SortFunc(tests, byTime)
	fmt.Printf("\nsuite time: %s wall, first event to last\n", last.Sub(first).Round(time.Second))
	fmt.Println("packages, longest first (go test runs -p of them at once):")
	for _, p := range packages {
		if p.elapsed >= 1 {
			fmt.Printf("  %7.0f s  %s\n", p.elapsed, short(p.name))
		}
	}
	fmt.Println("tests of a minute or more:")
	for _, t := range tests {
		if t.elapsed >= 60 {
			fmt.Printf("  %7.0f s  %s\n", t.elapsed, t.name)
		}
	}
	if len(failed) > 0 {
		// Again, short, last: a failed test's whole output (consoles,
		// logs) can be long enough that a reader of the tail alone, as
		// CI's summary shows it, misses the lines that said why.
		fmt.Println("what the failed tests said last (one line per message, continuation lines left out):")
		for _, name := range failed {
			lines := said[name]
			if len(lines) > sayLast {
				lines = lines[len(lines)-sayLast:]
			}
			fmt.Printf("  %s:\n", name)
			for _, l := range lines {
				if len(l) > 240 {
					l = l[:240] + "…"
				}
				fmt.Printf("    %s\n", l)
			}
		}
		fmt.Printf("failed: %s\n", strings.Join(failed, ", "))
	}
}

// sayLast is how many of a failed test's messages the summary repeats.
const sayLast = 20

// logMessage is the first line of a t.Log or t.Error message as go test
// prints it: indented, the file and line, the message.
var logMessage = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// logLines picks the first line of each message out of a test's output.
func logLines(output []string) []string {
	var lines []string
	for _, chunk := range output {
		for _, l := range strings.Split(strings.TrimRight(chunk, "\n"), "\n") {
			if logMessage.MatchString(l) {
				lines = append(lines, strings.TrimSpace(l))
			}
		}
	}
	return lines
}

// short is a package's path without the module's.
func short(pkg string) string {
	if s, ok := strings.CutPrefix(pkg, "github.com/ocfw/ocfw/"); ok {
		return s
	}
	return pkg
}
