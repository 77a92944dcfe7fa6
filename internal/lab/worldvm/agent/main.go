// Command agent is the world VM's /init (package worldvm builds it for
// GOARCH=386 GO386=softfloat). It mounts /proc, /sys, /dev and /tmp,
// loads the initramfs's modules, brings lo up, prints WORLD-READY and
// then serves one command per console line, answering each with one
// WORLD-OK or WORLD-ERR line (the protocol is in package worldvm).
//
// NS names a network namespace: "root" is the VM's own, others are made
// by `ns`. Addresses are IPv4 literals; HOST:PORT takes no names.
//
//	ns NAME [IF...]           create namespace NAME (lo up) if new, move the links into it
//	addr NS IF CIDR           add an address                      -> "IF CIDR"
//	up NS IF                  set the link up, wait for carrier   -> "IF up, carrier after 1.2s"
//	route NS default|CIDR GW  add a route                         -> "default via GW"
//	sysctl NS KEY VALUE       set a network sysctl (net.ipv4.ip_forward 1: a router)
//	esp NS SRC DST SPI SEQ    send one forged ESP packet from any source address
//	replay NS CAPTURE SRC DST MAX  send again the last MAX ESP packets SRC->DST an ended
//	                          capture (NS/IF) kept -> "replayed N: spi 0x... seq A-B"
//	xfrm-stat NS              the namespace's /proc/net/xfrm_stat, "Name N" a line
//	show NS                   links, addresses, routes            -> one per line
//	dhcp-server NS IF FIRST LAST ROUTER|- DNS|- LEASE
//	                          serve leases FIRST..LAST on IF (which needs an address)
//	leases NS                 the DHCP server's leases            -> "MAC IP acked|offered" per line
//	dhcp-client NS IF         get a lease, apply address, default route and DNS
//	                          -> "addr A/N router R dns D server S lease L" ("-" for none)
//	echo-server NS PORT       TCP: each connection gets "from IP:PORT\n", then its first line echoed
//	tcp NS HOST:PORT LINE...  connect, send LINE, print what came back until EOF or 3 s idle
//	dns NS SERVER|- NAME      A query over UDP (- is the server dhcp-client learned)
//	                          -> the addresses, space-separated; "NXDOMAIN"; "" for no data
//	dns-server NS NAME=IP[,IP]...  answer A queries for fixed names, NXDOMAIN for others
//	ssh NS HOST:PORT USER KEYFILE|password[=SECRET] CMD...
//	                          -> "exit N hostkey SHA256:...\n" then the command's output
//	ssh-server NS PORT AUTHORIZED_KEYS  an SSH server (public keys only) for testing the client:
//	                          runs echo ARGS, exit N, whoami
//	ntp-server NS             SNTP on UDP 123 with the VM's clock
//	ntp NS SERVER             -> "time RFC3339 stratum N offset D"
//	events NS                 what the servers saw, one per line, then forget them
//	veth NS1 IF1 NS2 IF2      join two namespaces with a veth pair, both ends up
//	write PATH CONTENT        write a file (CONTENT quoted as a Go string)
//	start NS NAME [VAR=VALUE...] PROGRAM [ARG...]
//	                          run a program from a tree in the background, with a
//	                          private /run and /var/run (its own mount namespace)
//	exec NS [VAR=VALUE...] PROGRAM [ARG...]
//	                          run a program to its end -> its output; exit != 0 is an error
//	output NAME               a started program's state and output (the end)
//	stop NAME                 SIGTERM (SIGKILL after 10 s) -> how it exited, output
//	ike NS NAME CONFIG-JSON   run ocfw's IKEv2 endpoint (router/ike) for one peer on UDP
//	                          500/4500, recording its CHILD SAs (the JSON: agent's IKEConfig)
//	ike-status NAME           -> JSON: the endpoint's Status, the CHILD SAs, its log
//	ike-stop NAME             close the endpoint (no deletes sent) and free its ports
//	sink-server NS PORT       TCP: reads each connection to its end, answers the byte count
//	stream NS HOST:PORT DURATION  send to a sink-server for DURATION
//	                          -> JSON: the bytes it counted, seconds until its answer
//	manual NS STORE install|check|remove TUNNEL-JSON
//	                          a manually keyed tunnel (router/ipsec's Tunnel) as the router
//	                          keeps it: install/check through Seqs with the store in the
//	                          file STORE -> JSON: its counters and the store's reservation
//	poweroff                  answer, then power off
//	help                      this list
//
// Errors start with a kind: usage, no-ns, failed; network errors
// refused, timeout, no-route (ENETUNREACH: no route), unreachable
// (EHOSTUNREACH: no answer to ARP, or ICMP unreachable); auth for an SSH
// server that refused the credentials; nxdomain is not an error.
//
// Servers run until poweroff; the DHCP client does not renew its lease.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

type command struct {
	usage    string        // the arguments, for messages
	min, max int           // argument count; max < 0: the last one takes the rest of the line
	timeout  time.Duration // default time limit
	run      func(ctx context.Context, a *agent, args []string) (string, error)
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"ns":          {"NAME [IF...]", 1, 99, 15 * time.Second, cmdNS},
		"addr":        {"NS IF CIDR", 3, 3, 15 * time.Second, cmdAddr},
		"up":          {"NS IF", 2, 2, 15 * time.Second, cmdUp},
		"route":       {"NS default|CIDR GW[%IF]|dev:IF [SRC]", 3, 4, 15 * time.Second, cmdRoute},
		"show":        {"NS", 1, 1, 15 * time.Second, cmdShow},
		"show6":       {"NS", 1, 1, 15 * time.Second, cmdShow6},
		"sysctl":      {"NS KEY VALUE", 3, 3, 15 * time.Second, cmdSysctl},
		"esp":         {"NS SRC DST SPI SEQ", 5, 5, 15 * time.Second, cmdESP},
		"dhcp-server": {"NS IF FIRST LAST ROUTER|- DNS|- LEASE", 7, 7, 15 * time.Second, cmdDHCPServer},
		"leases":      {"NS", 1, 1, 15 * time.Second, cmdLeases},
		"dhcp-client": {"NS IF", 2, 2, 40 * time.Second, cmdDHCPClient},
		"echo-server": {"NS PORT", 2, 2, 15 * time.Second, cmdEchoServer},
		"tcp":         {"NS HOST:PORT LINE...", 3, -1, 10 * time.Second, cmdTCP},
		"dns":         {"NS SERVER|- NAME", 3, 3, 10 * time.Second, cmdDNS},
		"dns-server":  {"NS NAME=IP[,IP]...", 2, 99, 15 * time.Second, cmdDNSServer},
		"ssh":         {"NS HOST:PORT USER KEYFILE|password[=SECRET] CMD...", 5, -1, 40 * time.Second, cmdSSH},
		"ssh-server":  {"NS PORT AUTHORIZED_KEYS", 3, 3, 15 * time.Second, cmdSSHServer},
		"ntp-server":  {"NS", 1, 1, 15 * time.Second, cmdNTPServer},
		"ntp":         {"NS SERVER", 2, 2, 10 * time.Second, cmdNTP},
		"events":      {"NS", 1, 1, 15 * time.Second, cmdEvents},
		"veth":        {"NS1 IF1 NS2 IF2", 4, 4, 15 * time.Second, cmdVeth},
		"write":       {"PATH CONTENT", 2, 2, 15 * time.Second, cmdWrite},
		"start":       {"NS NAME [VAR=VALUE...] PROGRAM [ARG...]", 3, 99, 15 * time.Second, cmdStart},
		"exec":        {"NS [VAR=VALUE...] PROGRAM [ARG...]", 2, 99, 30 * time.Second, cmdExec},
		"output":      {"NAME", 1, 1, 15 * time.Second, cmdOutput},
		"stop":        {"NAME [kill]", 1, 2, 20 * time.Second, cmdStop},
		"ike":         {"NS NAME CONFIG-JSON", 3, 3, 15 * time.Second, cmdIKE},
		"ike-status":  {"NAME", 1, 1, 15 * time.Second, cmdIKEStatus},
		"ike-stop":    {"NAME", 1, 1, 15 * time.Second, cmdIKEStop},
		"ike-rekey":   {"NAME child|ike", 2, 2, 15 * time.Second, cmdIKERekey},
		"masquerade":  {"NS OUT-IF [FORWARD-IKE-TO]", 2, 3, 15 * time.Second, cmdMasquerade},
		"capture":     {"NS IF", 2, 2, 15 * time.Second, cmdCapture},
		"capture-end": {"NS IF [MARKER]", 2, 3, 15 * time.Second, cmdCaptureEnd},
		"replay":      {"NS CAPTURE SRC DST MAX", 5, 5, 15 * time.Second, cmdReplay},
		"xfrm-stat":   {"NS", 1, 1, 15 * time.Second, cmdXfrmStat},
		"udp-echo":    {"NS [ADDR:]PORT", 2, 2, 15 * time.Second, cmdUDPEcho},
		"probe":       {"NAME NS HOST:PORT INTERVAL", 4, 4, 15 * time.Second, cmdProbe},
		"probe-end":   {"NAME", 1, 1, 15 * time.Second, cmdProbeEnd},
		"sink-server": {"NS PORT", 2, 2, 15 * time.Second, cmdSinkServer},
		"stream":      {"NS HOST:PORT DURATION", 3, 3, 90 * time.Second, cmdStream},
		"manual":      {"NS STORE install|check|remove TUNNEL-JSON", 4, 4, 15 * time.Second, cmdManual},
		"poweroff":    {"", 0, 0, 15 * time.Second, nil},
		"help":        {"", 0, 0, 15 * time.Second, cmdHelp},
	}
}

// agent is the state behind the commands.
type agent struct {
	out io.Writer
	wmu sync.Mutex // one console line at a time

	mu    sync.Mutex
	nss   map[string]*netNS
	procs map[string]*proc // started programs by name
}

func main() {
	if os.Getpid() != 1 && len(os.Args) > 1 && os.Args[0] == startArg0 {
		err := trampoline(os.Args[1:])
		fmt.Fprintf(os.Stderr, "world-start %s: %v\n", os.Args[1], err)
		os.Exit(127)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "worldvm agent: runs as /init in the world VM (package worldvm starts it)")
		os.Exit(2)
	}
	a := &agent{out: os.Stdout, nss: map[string]*netNS{}}
	if err := a.setup(); err != nil {
		a.println(fmt.Sprintf("%s %s", worldvm.MarkFail, strconv.QuoteToASCII(err.Error())))
		kerneltest.PowerOff()
		select {}
	}
	a.println(fmt.Sprintf("%s %s", worldvm.MarkReady, uptime()))
	a.serve(os.Stdin)
	a.println("world: console closed; powering off")
	kerneltest.PowerOff()
	select {}
}

func (a *agent) setup() error {
	if err := kerneltest.PrepareGuest(); err != nil {
		return err
	}
	// The host's command lines are not echoed: replies alone come back.
	if t, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
		t.Lflag &^= unix.ECHO | unix.ECHONL
		unix.IoctlSetTermios(0, unix.TCSETS, t)
	}
	unix.Sethostname([]byte("world"))
	// Wait for the kernel's random pool. A blocking getrandom makes the
	// kernel generate entropy (jitter) at once; code that only polls
	// with GRND_NONBLOCK (u-root's uio/rand, behind the DHCP client's
	// transaction IDs) would spin on an idle VM for minutes.
	start := time.Now()
	if _, err := rand.Read(make([]byte, 16)); err != nil {
		return fmt.Errorf("random pool: %w", err)
	}
	a.println(fmt.Sprintf("world: random pool ready in %v", time.Since(start).Round(time.Millisecond)))
	root, err := rootNS()
	if err != nil {
		return err
	}
	a.nss[root.name] = root
	return nil
}

func (a *agent) println(line string) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	io.WriteString(a.out, line+"\n")
}

func (a *agent) serve(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		req, err := worldvm.ParseRequest(line)
		if err != nil {
			// Without a number the host cannot be answered: say it for the log.
			a.println("world: bad request: " + strconv.QuoteToASCII(err.Error()))
			if req.Seq > 0 {
				a.println(worldvm.FormatReply(req.Seq, "", kinded("usage", err)))
			}
			continue
		}
		a.println("world: > " + strconv.QuoteToASCII(line))
		if req.Words[0] == "poweroff" {
			a.println(worldvm.FormatReply(req.Seq, "powering off", nil))
			return
		}
		start := time.Now()
		text, err := a.run(req)
		a.println(worldvm.FormatReply(req.Seq, text, err))
		a.println(fmt.Sprintf("world: < %d in %v", req.Seq, time.Since(start).Round(time.Millisecond)))
	}
}

func (a *agent) run(req worldvm.Request) (string, error) {
	name, args := req.Words[0], req.Words[1:]
	c, ok := commands[name]
	if !ok {
		return "", kinded("usage", fmt.Errorf("unknown command %q; have %s", name, strings.Join(commandNames(), " ")))
	}
	if len(args) < c.min || (c.max >= 0 && len(args) > c.max) {
		return "", kinded("usage", fmt.Errorf("usage: %s %s", name, c.usage))
	}
	if c.max < 0 && len(args) > c.min {
		// The last argument takes the rest of the line.
		args = append(args[:c.min-1:c.min-1], strings.Join(args[c.min-1:], " "))
	}
	timeout := c.timeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		text, err := c.run(ctx, a, args)
		done <- result{text, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			r.err = withKind(r.err)
		}
		return r.text, r.err
	case <-time.After(timeout + 5*time.Second):
		// A command that ignored its context: answer anyway, and leave
		// the goroutines on the console to find out where it hangs.
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		a.println("world: goroutines:\n" + string(buf))
		return "", kinded("timeout", fmt.Errorf("%s did not finish within %v", name, timeout))
	}
}

func commandNames() []string {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func cmdHelp(context.Context, *agent, []string) (string, error) {
	var b strings.Builder
	for _, n := range commandNames() {
		fmt.Fprintln(&b, strings.TrimSpace(n+" "+commands[n].usage))
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
