// Package espspeed measures IPsec ESP throughput per crypto engine inside
// the box: the modern form of the seed reports' IPsec tables, and what
// the policy needs to choose the kernel's engine for the traffic tunnels
// carry (MTU-sized packets) on measurement rather than on the priority a
// driver registered with.
//
// Measure builds two network namespaces joined by a veth pair, with an
// ESP tunnel between them (router/ipsec, the same SAs a site tunnel
// uses: AES-CBC with HMAC, extended sequence numbers, anti-replay
// window). For each engine in turn it makes that engine the kernel's
// choice for the cipher's generic name (ocf/kcrypto: prefer, which drops
// what the kernel built on the others), re-installs the SAs so that they
// bind it, checks from /proc/crypto's use counts that the SAs really hold
// a transform built on it, then sends UDP from one namespace to the
// other at each packet size for a fixed window and counts what arrives:
// MB/s received (not sent: an engine that loses or stalls packets gets
// no credit for them) and the CPU busy over the window (/proc/stat, all
// CPUs: softirqs and kernel workers included, which is where ESP runs).
// Afterwards the SAs and namespaces are gone and every priority it
// changed is back as it found it.
//
// The whole run is bounded by Config.Budget: each (engine, size) step's
// window is an equal share of what is left of it (engine changes and
// the wait for an engine's queue to drain between steps come out of the
// same budget), and no step waits on an engine beyond its own deadline,
// so a stalled engine costs its share, not the boot.
package espspeed

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf/afalg"
	"github.com/ocfw/ocfw/ocf/esp"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/router/ipsec"
	"github.com/ocfw/ocfw/router/netns"
)

// Defaults of Config.
var (
	DefaultSizes  = []int{64, 512, 1400} // UDP payload bytes; 1400 is kcrypto.MTU
	DefaultBudget = 10 * time.Second
)

const (
	DefaultCipher = "aes-128-cbc"
	DefaultAuth   = "hmac-sha1"
)

// Engine is one implementation of the cipher's kernel name to measure.
type Engine struct {
	// ID names it in the rows: a catalog engine id ("virtio-crypto",
	// "geode-aes"), or esp.Software.
	ID string `json:"id"`
	// Driver is its driver name under the cipher's generic name, e.g.
	// "virtio_crypto_aes_cbc" for cbc(aes). For esp.Software it may be left
	// empty: the best software implementation registered (or buildable,
	// as cbc(aes-fixed-time)) is used.
	Driver   string `json:"driver,omitempty"`
	Hardware bool   `json:"hardware"`
}

// Config says what to measure.
type Config struct {
	// Engines are the hardware engines to measure (those that passed the
	// self-test for Cipher). Software is measured first whether listed
	// or not; list it (Hardware false) to pin its driver.
	Engines []Engine
	// Cipher and Auth are a tunnel's algorithms (ipsec.Ciphers, Auths);
	// empty means DefaultCipher and DefaultAuth.
	Cipher, Auth string
	// Sizes are UDP payload sizes in bytes; nil means DefaultSizes.
	Sizes []int
	// Budget bounds the whole run; 0 means DefaultBudget. About 70% of
	// it is spent sending, shared equally by the (engine, size) steps.
	Budget time.Duration
}

// The test network: two namespaces on one veth pair, an ESP tunnel
// between 10.1.0.1 (behind 198.51.100.1) and 10.2.0.1 (behind
// 198.51.100.2). The namespaces are private, so the addresses clash
// with nothing on the box.
var (
	wanA, wanB = netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	hostA      = netip.MustParseAddr("10.1.0.1")
	hostB      = netip.MustParseAddr("10.2.0.1")
)

const (
	port = 9
	// replayWindow and ESN as the key tool gives real tunnels, so the SAs
	// build the same AEAD (authencesn) the site tunnels use.
	replayWindow = 128
	// sndBuf bounds the datagrams in flight: with an asynchronous engine
	// they wait in its queue charged to the sender's socket, as on a card
	// with a bounded queue, and one step's backlog drains quickly. The
	// kernel doubles it: a few MTU-sized datagrams, a dozen small ones.
	// Software ESP is not held back by it: veth frees a datagram from
	// the socket's account as it crosses into the other namespace.
	sndBuf = 4 << 10
	rcvBuf = 512 << 10
	// sendShare is the part of the budget left that a step's window
	// takes; the rest is for drains, engine changes and warm-ups.
	sendShare = 0.8
	// minWindow is the shortest window worth measuring.
	minWindow = 50 * time.Millisecond
)

// Measure runs the measurement (see the package comment). It returns an
// error only when nothing could be measured (no network namespaces, no
// XFRM, an unknown cipher); an engine that fails gets rows with Err.
// Needs root, and the modules in ipsec.Modules, veth, crypto_user,
// af_alg and algif_skcipher.
func Measure(ctx context.Context, cfg Config) (*esp.Result, error) {
	start := time.Now()
	if cfg.Cipher == "" {
		cfg.Cipher = DefaultCipher
	}
	if cfg.Auth == "" {
		cfg.Auth = DefaultAuth
	}
	if cfg.Sizes == nil {
		cfg.Sizes = DefaultSizes
	}
	cfg.Sizes = slices.Compact(slices.Sorted(slices.Values(cfg.Sizes))) // ascending, as measurements are
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	ciph, err := ipsec.CipherAlgorithm(cfg.Cipher)
	if err != nil {
		return nil, fmt.Errorf("espspeed: %w", err)
	}
	auth, err := ipsec.AuthAlgorithm(cfg.Auth)
	if err != nil {
		return nil, fmt.Errorf("espspeed: %w", err)
	}
	cat, _ := catalog.LookupCipher(cfg.Cipher)
	for _, s := range cfg.Sizes {
		if s < 8 || s > 1472 {
			return nil, fmt.Errorf("espspeed: packet size %d: 8 to 1472 bytes (one datagram, no fragments)", s)
		}
	}
	res := &esp.Result{Cipher: cfg.Cipher, Auth: cfg.Auth, Kernel: ciph.Kernel}
	ctx, cancel := context.WithTimeout(ctx, cfg.Budget+cfg.Budget/2)
	defer cancel()

	// What the kernel resolves now, then its registrations: resolving
	// may build an instance (as any user's first bind would), which is
	// then part of the state to come back to.
	if r, err := kcrypto.Resolve(ciph.Kernel, cat.KernelType); err == nil {
		res.Default = r.Driver
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("what the kernel resolves %s to before the run: %v", ciph.Kernel, err))
	}
	before, err := kcrypto.List("")
	if err != nil {
		return nil, fmt.Errorf("espspeed: %w", err)
	}

	engines, err := withSoftware(cfg.Engines, ciph.Kernel, cat.KernelType, before)
	if err != nil {
		return nil, fmt.Errorf("espspeed: %w", err)
	}
	built := map[string]int{} // instances this run built: driver -> priority at build
	n := &network{}
	defer func() {
		n.close()
		res.Notes = append(res.Notes, restore(res, before, built, cat.KernelType)...)
		res.Seconds = time.Since(start).Seconds()
	}()
	if err := n.open(); err != nil {
		return nil, fmt.Errorf("espspeed: %w", err)
	}

	// The budget's end, less a twentieth for putting the kernel back.
	end := start.Add(cfg.Budget - cfg.Budget/20)
	stepsLeft := len(engines) * len(cfg.Sizes)
	// window is a step's share of what is left; steps is how many of the
	// engine's own are still to come.
	window := func(steps int) time.Duration {
		return time.Duration(float64(time.Until(end)) * sendShare / float64(stepsLeft-len(cfg.Sizes)+steps))
	}
	tag := uint32(0)
	for i, e := range engines {
		rows := make([]esp.Row, len(cfg.Sizes))
		for j, s := range cfg.Sizes {
			rows[j] = esp.Row{Engine: e.ID, Driver: e.Driver, Hardware: e.Hardware, Size: s}
		}
		res.Rows = append(res.Rows, n.engine(ctx, e, rows, tunnel(i, cfg.Cipher, cfg.Auth, ciph.KeySize, auth.KeySize), ciph.Kernel, cat.KernelType, built, &tag, window)...)
		stepsLeft -= len(rows)
		n.removeTunnel()
	}
	return res, nil
}

// engine measures one engine: rows (one per size, filled in) after
// making it the kernel's choice and installing tun.
func (n *network) engine(ctx context.Context, e Engine, rows []esp.Row, tun ipsec.Tunnel, name, typ string, built map[string]int, tag *uint32, window func(int) time.Duration) []esp.Row {
	fail := func(err error) []esp.Row {
		for j := range rows {
			rows[j].Err = err.Error()
		}
		return rows
	}
	spent := errors.New("not measured: the run's budget was spent")
	if ctx.Err() != nil || window(len(rows)) < minWindow {
		return fail(spent)
	}
	sa, err := n.choose(e, tun, name, typ, built)
	for j := range rows {
		rows[j].SADriver = sa
	}
	if err != nil {
		return fail(err)
	}
	if err := n.warmUp(ctx, window(len(rows))); err != nil {
		return fail(err)
	}
	for j := range rows {
		w := window(len(rows) - j)
		if ctx.Err() != nil || w < minWindow {
			rows[j].Err = spent.Error()
			continue
		}
		*tag++
		n.step(ctx, &rows[j], *tag, w)
		if rows[j].Packets == 0 && ctx.Err() == nil {
			// Nothing came through in the window although the
			// warm-up's datagram did: the receiver was not run
			// (a starved guest). Once more, then the row says so.
			*tag++
			n.step(ctx, &rows[j], *tag, w)
		}
	}
	return rows
}

// withSoftware puts the software reference first: the engine listed
// without Hardware, or the best software implementation the kernel has
// or can build for name.
func withSoftware(engines []Engine, name, typ string, algs []kcrypto.Alg) ([]Engine, error) {
	var out []Engine
	var soft *Engine
	for _, e := range engines {
		if !e.Hardware {
			if soft == nil {
				e := e
				soft = &e
			}
			continue
		}
		if e.Driver == "" {
			return nil, fmt.Errorf("engine %s: no driver name", e.ID)
		}
		out = append(out, e)
	}
	if soft == nil {
		soft = &Engine{ID: esp.Software}
	}
	if soft.Driver == "" {
		drv, err := softwareDriver(name, algs, out)
		if err != nil {
			return nil, err
		}
		soft.Driver = drv
	}
	return append([]Engine{*soft}, out...), nil
}

// softwareDriver is the best software implementation of name: the
// highest priority among the software registrations of name itself and
// the template instances over the software implementations of its
// argument (cbc(aes-fixed-time) over aes-fixed-time). Hardware is what
// the listed engines, and the catalog's hardware engines' modules,
// register.
func softwareDriver(name string, algs []kcrypto.Alg, hw []Engine) (string, error) {
	hwMods := map[string]bool{}
	hwDrv := map[string]bool{}
	for _, e := range kcrypto.CatalogEngines() {
		hwMods[e.Module] = true
	}
	for _, e := range hw {
		hwDrv[e.Driver] = true
		if a, ok := kcrypto.Find(algs, e.Driver); ok && a.Module != "kernel" {
			hwMods[a.Module] = true
		}
	}
	soft := func(a kcrypto.Alg) bool {
		return !a.Internal && a.SelfTest == "passed" && !hwMods[a.Module] && !hwDrv[a.Driver] && !builtOnAny(a.Driver, hwDrv)
	}
	best, prio := "", -1
	for _, a := range algs {
		if a.Name == name && soft(a) && a.Priority > prio {
			best, prio = a.Driver, a.Priority
		}
	}
	if tmpl, arg := split(name); tmpl != "" {
		for _, a := range algs {
			if a.Name == arg && a.Type == "cipher" && soft(a) && a.Priority > prio {
				best, prio = tmpl+"("+a.Driver+")", a.Priority
			}
		}
	}
	if best == "" {
		return "", fmt.Errorf("no software implementation of %s in the kernel", name)
	}
	return best, nil
}

// builtOnAny reports whether driver is an instance over one of drivers.
func builtOnAny(driver string, drivers map[string]bool) bool {
	for _, tok := range strings.FieldsFunc(driver, func(r rune) bool { return r == '(' || r == ')' || r == ',' }) {
		if drivers[tok] {
			return true
		}
	}
	return false
}

// split is a one-argument template name's parts: "cbc", "aes" for
// "cbc(aes)"; "" for a name not of that form.
func split(name string) (tmpl, arg string) {
	i := strings.IndexByte(name, '(')
	if i <= 0 || !strings.HasSuffix(name, ")") || strings.Contains(name[i+1:len(name)-1], ",") {
		return "", ""
	}
	return name[:i], name[i+1 : len(name)-1]
}

// tunnel is namespace A's side of engine i's tunnel: fresh SPIs per
// engine (no packet in flight from the last engine's SAs can land in
// these) and random keys.
func tunnel(i int, cipher, auth string, encSize, authSize int) ipsec.Tunnel {
	key := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	sa := func(spi uint32) ipsec.SA {
		return ipsec.SA{SPI: spi, Cipher: cipher, Auth: auth, EncKey: key(encSize), AuthKey: key(authSize), ReplayWindow: replayWindow, ESN: true}
	}
	base := uint32(0x0e5b0000) + uint32(i)<<4
	return ipsec.Tunnel{
		Name: "espspeed", Local: wanA, Remote: wanB,
		LocalNet: netip.PrefixFrom(hostA, 32), RemoteNet: netip.PrefixFrom(hostB, 32),
		Out: sa(base + 1), In: sa(base + 2),
	}
}

func mirror(t ipsec.Tunnel) ipsec.Tunnel {
	return ipsec.Tunnel{Name: t.Name, Local: t.Remote, Remote: t.Local, LocalNet: t.RemoteNet, RemoteNet: t.LocalNet, Out: t.In, In: t.Out}
}

// network is the two namespaces, their XFRM handles and the UDP pair.
type network struct {
	a, b   *netns.NS
	ha, hb *ipsec.Handle
	tun    *ipsec.Tunnel // installed now, A's side
	send   *net.UDPConn  // in A
	recv   *net.UDPConn  // in B
	// The receiver counts datagrams whose first four bytes are tag.
	tag         atomic.Uint32
	bytes, pkts atomic.Int64
	recvDone    chan struct{}
	payload     []byte
}

func (n *network) open() error {
	var err error
	if n.a, err = netns.New("esp-a"); err != nil {
		return err
	}
	if n.b, err = netns.New("esp-b"); err != nil {
		return err
	}
	if err := netns.Veth(n.a, "esp0", wanA.String()+"/24", n.b, "esp1", wanB.String()+"/24"); err != nil {
		return err
	}
	for _, x := range []struct {
		ns        *netns.NS
		ifname    string
		self, via netip.Addr
		peer      netip.Addr
	}{{n.a, "esp0", hostA, wanB, hostB}, {n.b, "esp1", hostB, wanA, hostA}} {
		if err := x.ns.AddAddr(x.ifname, x.self.String()+"/32"); err != nil {
			return err
		}
		if err := x.ns.Route(x.peer.String()+"/32", x.via, x.self); err != nil {
			return err
		}
	}
	if n.ha, err = ipsec.OpenInNetNS(n.a.FD()); err != nil {
		return err
	}
	if n.hb, err = ipsec.OpenInNetNS(n.b.FD()); err != nil {
		return err
	}
	err = n.b.Do(func() (err error) {
		n.recv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: hostB.AsSlice(), Port: port})
		return err
	})
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	n.recv.SetReadBuffer(rcvBuf)
	err = n.a.Do(func() (err error) {
		n.send, err = net.DialUDP("udp4", &net.UDPAddr{IP: hostA.AsSlice()}, &net.UDPAddr{IP: hostB.AsSlice(), Port: port})
		return err
	})
	if err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	n.send.SetWriteBuffer(sndBuf)
	n.payload = make([]byte, 1472)
	rand.Read(n.payload)
	n.recvDone = make(chan struct{})
	go n.receive()
	return nil
}

func (n *network) receive() {
	defer close(n.recvDone)
	buf := make([]byte, 2048)
	for {
		k, err := n.recv.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if k >= 4 && binary.LittleEndian.Uint32(buf) == n.tag.Load() {
			n.pkts.Add(1)
			n.bytes.Add(int64(k))
		}
	}
}

func (n *network) close() {
	if n.tun != nil {
		n.removeTunnel()
	}
	if n.send != nil {
		n.send.Close()
	}
	if n.recv != nil {
		n.recv.Close()
		<-n.recvDone
	}
	for _, h := range []*ipsec.Handle{n.ha, n.hb} {
		if h != nil {
			h.Close()
		}
	}
	for _, ns := range []*netns.NS{n.a, n.b} {
		if ns != nil {
			ns.Close()
		}
	}
}

func (n *network) removeTunnel() {
	if n.tun == nil {
		return
	}
	n.ha.Remove(*n.tun)
	n.hb.Remove(mirror(*n.tun))
	n.tun = nil
}

// choose makes e the kernel's choice for name, installs tun (and its
// mirror) and returns the AEAD the SAs hold, checked to be built on e's
// driver.
func (n *network) choose(e Engine, tun ipsec.Tunnel, name, typ string, built map[string]int) (string, error) {
	if err := kcrypto.MakeChoice(name, typ, e.Driver, built); err != nil {
		return "", err
	}
	pre, err := afalg.ReadProcCrypto("")
	if err != nil {
		return "", err
	}
	m := mirror(tun)
	if err := n.ha.Install(tun); err != nil {
		return "", err
	}
	n.tun = &tun
	if err := n.hb.Install(m); err != nil {
		return "", err
	}
	post, err := afalg.ReadProcCrypto("")
	if err != nil {
		return "", err
	}
	// Four SAs, each holding one AEAD transform.
	return heldAEAD(pre, post, name, e.Driver, 4)
}

// heldAEAD finds the AEAD over name (authenc or authencesn) whose use
// count rose by at least sas between pre and post — the transforms the
// new SAs hold, the kernel's own record of what they use — and checks
// that it is built on driver.
func heldAEAD(pre, post []afalg.Entry, name, driver string, sas int) (string, error) {
	was := map[string]int{}
	for _, e := range pre {
		if e.Type == "aead" {
			was[e.Driver] = e.Refcnt
		}
	}
	var held []string
	for _, e := range post {
		if e.Type != "aead" || !strings.HasPrefix(e.Name, "authenc") || !strings.HasSuffix(e.Name, ","+name+")") {
			continue
		}
		before, ok := was[e.Driver]
		if !ok {
			before = 1 // registered by the SAs' own lookup: the registration's reference
		}
		if e.Refcnt-before >= sas {
			held = append(held, e.Driver)
		}
	}
	switch {
	case len(held) == 0:
		return "", fmt.Errorf("no %s AEAD in /proc/crypto gained the %d references the SAs hold", name, sas)
	case len(held) > 1:
		return "", fmt.Errorf("the SAs' transforms are ambiguous in /proc/crypto: %s", strings.Join(held, ", "))
	}
	if !strings.HasSuffix(held[0], ","+driver+")") {
		return held[0], fmt.Errorf("the SAs hold %s, not a transform built on %s", held[0], driver)
	}
	return held[0], nil
}

// warmUp sends single datagrams until one comes through the SAs (the
// first also resolves the peer's MAC address), within limit.
func (n *network) warmUp(ctx context.Context, limit time.Duration) error {
	n.tag.Store(0)
	n.pkts.Store(0)
	// At least warmUpFloor: a guest starved by its host (QEMU beside
	// other guests) took over 0.9 s for the first datagram; the
	// warm-up ends at the first one, so a long floor costs nothing on
	// a board.
	limit = max(limit, warmUpFloor)
	deadline := time.Now().Add(limit)
	msg := make([]byte, 64)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n.send.SetWriteDeadline(deadline)
		n.send.Write(msg) // tag 0
		for t := time.Now().Add(20 * time.Millisecond); time.Now().Before(t); time.Sleep(2 * time.Millisecond) {
			if n.pkts.Load() > 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("no datagram came through the SAs within %v", limit.Round(time.Millisecond))
}

// warmUpFloor is the least time warmUp gives the first datagram.
const warmUpFloor = 3 * time.Second

// step measures one row: datagrams of row.Size tagged with tag, sent for
// window; then it waits (at most an eighth of the window) for the
// engine's queue to drain so that the next step starts clean.
func (n *network) step(ctx context.Context, row *esp.Row, tag uint32, window time.Duration) {
	n.tag.Store(tag)
	n.bytes.Store(0)
	n.pkts.Store(0)
	row.Err = "" // a step measured again starts clean
	msg := n.payload[:row.Size]
	binary.LittleEndian.PutUint32(msg, tag)
	cpu0, cpuErr := readCPU()
	start := time.Now()
	end := start.Add(window)
	n.send.SetWriteDeadline(end)
	var sent int64
	var sendErr error
	for time.Now().Before(end) && ctx.Err() == nil {
		if _, err := n.send.Write(msg); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			// ENOBUFS, or ECONNREFUSED from an ICMP error: the
			// datagram is lost, the next one is tried.
			if sendErr == nil {
				sendErr = err
			}
			continue
		}
		sent++
	}
	if d := time.Until(end); d > 0 && ctx.Err() == nil {
		time.Sleep(d)
	}
	took := time.Since(start)
	bytes, pkts := n.bytes.Load(), n.pkts.Load()
	cpu1, cpuErr1 := readCPU()
	row.Sent, row.Packets, row.Millis = sent, pkts, took.Milliseconds()
	row.MBps = float64(bytes) / took.Seconds() / 1e6
	if cpuErr == nil && cpuErr1 == nil {
		row.CPU = cpu1.busySince(cpu0)
	}
	switch {
	case pkts == 0 && sendErr != nil:
		row.Err = fmt.Sprintf("nothing received in %v; sending: %v", window.Round(time.Millisecond), sendErr)
	case pkts == 0:
		row.Err = fmt.Sprintf("nothing received in %v (%d sent)", window.Round(time.Millisecond), sent)
	}
	n.drain(ctx, window/8)
}

// drain waits until the receiving SA has taken in as many packets as the
// sending SA put out (the engine's queue is empty), or until that count
// stops rising for a while (packets lost on the way), at most limit.
func (n *network) drain(ctx context.Context, limit time.Duration) {
	until := time.Now().Add(limit)
	var last uint64
	lastMove := time.Now()
	for time.Now().Before(until) && ctx.Err() == nil {
		out, err1 := n.ha.Counters(*n.tun)
		in, err2 := n.hb.Counters(mirror(*n.tun))
		if err1 != nil || err2 != nil || in.In.Packets >= out.Out.Packets {
			return
		}
		if in.In.Packets != last {
			last, lastMove = in.In.Packets, time.Now()
		} else if time.Since(lastMove) > 200*time.Millisecond {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cpuTimes is the first line of /proc/stat, in clock ticks.
type cpuTimes struct{ busy, total uint64 }

func readCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPU(string(b))
}

// parseCPU reads the "cpu" line: user nice system idle iowait irq
// softirq steal (guest time is already in user); idle and iowait are
// not busy.
func parseCPU(stat string) (cpuTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: no cpu line")
	}
	var t cpuTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t, nil
}

func (t cpuTimes) busySince(t0 cpuTimes) float64 {
	if t.total <= t0.total {
		return 0
	}
	return float64(t.busy-t0.busy) / float64(t.total-t0.total)
}

// restore puts back every priority of the name's implementations that
// the run changed, gives instances the run built the priority they were
// built with, and flushes every implementation of the name so that what
// was built on the run's choices (the SAs' AEADs) is rebuilt on the
// kernel's own choice. It returns notes for what did not go back.
func restore(res *esp.Result, before []kcrypto.Alg, built map[string]int, typ string) []string {
	notes := kcrypto.Restore(res.Kernel, before, built)
	r, err := kcrypto.Resolve(res.Kernel, typ)
	if err != nil {
		return append(notes, fmt.Sprintf("what the kernel resolves %s to after the run: %v", res.Kernel, err))
	}
	res.Restored = r.Driver
	if res.Default != "" && r.Driver != res.Default {
		notes = append(notes, fmt.Sprintf("the kernel resolved %s to %s before the run and to %s after", res.Kernel, res.Default, r.Driver))
	}
	return notes
}
