// Command bench measures ocfw against its references and writes
// bench/results/bench.md and bench.json: Go's software engine against
// openssl speed (on this host, and as the boards' 386 build against
// Debian's i386 openssl with Geode-LX instructions only), the
// dispatcher's overhead, AF_ALG against Go inside one QEMU boot, and,
// where the firmware builder exists, build cost, sizes and boot time, and
// ESP throughput with ocfw's engine choice against the kernel's default;
// IKEv2 tunnel setup with ocfw's endpoint against strongSwan's, ESP
// throughput of an IKEv2-keyed tunnel against a manual one, and the IKE
// daemon's memory built for the NSLU2 under qemu-arm; the router's
// memory with IPv6 on against off, the NSLU2's firmware booted on its ARM
// stand-in; the time from the WAN link up to a LAN host's first packet to
// the WAN, IPv6 against IPv4, in network namespaces; and ocfw push and
// ocfw upgrade against rebuilding and reflashing, time and the downtime
// a world VM sees; and the seeds' own tools through the kernel (Debian's
// i386 openssl with the afalg engine, cryptodev-linux's tests/speed)
// against ocf speed in one QEMU boot.
//
// Figures are ratios of runs made side by side, interleaved, best of
// -trials: the host is shared, and noise only ever slows a run down.
// The IKE section's ESP throughput is the median of back-to-back pairs'
// ratios instead, and the manage section runs each way once.
//
//	bench/run [-trials 3] [-only crypto,crypto386,dispatch,afalg,build,rebuild,boot,esp,ike,ikemem,v6mem,v6time,manage,devcrypto]
//
// A full run also writes its tables into the marked section of
// docs/benchmarks-results.md (-doc), where the docs show them; a run with
// -only does so only when -doc is given.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// sections in run order; each fills its part of results.
var sections = []struct {
	name string
	run  func(context.Context, *runner) error
}{
	{"crypto", runCrypto},
	{"crypto386", runCrypto386},
	{"dispatch", runDispatch},
	{"afalg", runAFALG},
	{"build", runBuild},
	{"rebuild", runRebuild},
	{"boot", runBoot},
	{"esp", runESP},
	{"ike", runIKE},
	{"ikemem", runIKEMem},
	{"v6mem", runV6Mem},
	{"v6time", runV6Time},
	{"manage", runManage},
	{"devcrypto", runDevCrypto},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "image" {
		if err := imageChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench image:", err)
			os.Exit(1)
		}
		return
	}
	trials := flag.Int("trials", 3, "runs per side; the best counts")
	only := flag.String("only", "", "comma-separated sections to run (default all): crypto,crypto386,dispatch,afalg,build,rebuild,boot,esp,ike,ikemem,v6mem,v6time,manage,devcrypto")
	out := flag.String("out", "bench/results", "directory for bench.md and bench.json")
	benchtime := flag.String("benchtime", "200ms", "Go -test.benchtime per benchmark on the host")
	cold := flag.Bool("cold", true, "measure cold builds (empty Go build cache); they take minutes")
	doc := flag.String("doc", docResults, "document whose marked section gets the tables (\"\" for none; with -only only when given)")
	flag.Parse()
	docGiven := false
	flag.Visit(func(f *flag.Flag) { docGiven = docGiven || f.Name == "doc" })
	if *only != "" && !docGiven {
		*doc = ""
	}
	if *trials < 1 {
		fmt.Fprintln(os.Stderr, "bench: -trials must be at least 1")
		os.Exit(2)
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	for s := range want {
		if !knownSection(s) {
			fmt.Fprintf(os.Stderr, "bench: unknown section %q\n", s)
			os.Exit(2)
		}
	}
	if _, err := os.Stat("go.mod"); err != nil {
		fmt.Fprintln(os.Stderr, "bench: run from the repository root (bench/run does)")
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "ocfw-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	r := &runner{tmp: tmp, trials: *trials, benchtime: *benchtime, cold: *cold, res: &results{
		Command: "bench/run " + strings.Join(os.Args[1:], " "),
		Started: time.Now().UTC().Format(time.RFC3339),
		Host:    hostInfo(),
		Trials:  *trials,
	}}
	// An interrupted run stops its benchmarks and emulators with it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	failed := false
	for _, s := range sections {
		if len(want) > 0 && !want[s.name] || ctx.Err() != nil {
			continue
		}
		t0 := time.Now()
		r.logf("== %s", s.name)
		err := s.run(ctx, r)
		st := sectionStatus{Name: s.name, Seconds: time.Since(t0).Seconds()}
		if err != nil {
			st.Error = err.Error()
			failed = true
			r.logf("%s: %v", s.name, err)
		}
		r.res.Sections = append(r.res.Sections, st)
	}
	r.res.Seconds = time.Since(start).Seconds()
	r.res.Host.LoadAfter = loadAvg()
	werr := r.res.write(*out)
	if werr == nil && *doc != "" {
		if werr = writeDocSection(*doc, r.res.markdown()); werr == nil {
			r.logf("wrote the tables into %s", *doc)
		}
	}
	stop()
	os.RemoveAll(tmp) // os.Exit skips deferred calls
	if werr != nil {
		fmt.Fprintln(os.Stderr, "bench:", werr)
		os.Exit(1)
	}
	r.logf("wrote %s and %s in %s", filepath.Join(*out, "bench.md"), filepath.Join(*out, "bench.json"), time.Since(start).Round(time.Second))
	if failed {
		os.Exit(1)
	}
}

func knownSection(s string) bool {
	for _, x := range sections {
		if x.name == s {
			return true
		}
	}
	return false
}

// runner holds what the sections share.
type runner struct {
	tmp       string
	trials    int
	benchtime string
	cold      bool
	res       *results
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// run runs a command and returns its combined output; the error carries
// the output's tail.
func (r *runner) run(ctx context.Context, env []string, name string, args ...string) (string, error) {
	return r.runIn(ctx, "", env, name, args...)
}

// runIn is run in directory dir.
func (r *runner) runIn(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, tail(string(out), 600))
	}
	return string(out), nil
}

// goTestBinary compiles a package's tests once for the given environment.
func (r *runner) goTestBinary(ctx context.Context, pkg, name string, env ...string) (string, error) {
	bin := filepath.Join(r.tmp, name)
	if _, err := r.run(ctx, env, "go", "test", "-c", "-o", bin, pkg); err != nil {
		return "", err
	}
	return bin, nil
}

type hostInfoT struct {
	Hostname   string `json:"hostname"`
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GoVersion  string `json:"go"`
	OpenSSL    string `json:"openssl"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

func hostInfo() hostInfoT {
	h := hostInfoT{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAvg()}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("openssl", "version").Output(); err == nil {
		h.OpenSSL = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		h.GoVersion = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	return h
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
