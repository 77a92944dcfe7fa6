package router

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/dhcp"
	"github.com/ocfw/ocfw/router/netns"
	"github.com/ocfw/ocfw/site"
	"github.com/ocfw/ocfw/store"
)

// countingFile is a data partition image whose writes are counted: each
// WriteAt is one write command to the card.
type countingFile struct {
	*os.File
	writes, sectors atomic.Int64
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	f.writes.Add(1)
	f.sectors.Add(int64((len(p) + 511) / 512))
	return f.File.WriteAt(p, off)
}

// cardStore opens a store on a fresh data partition image file.
func cardStore(t *testing.T) (*store.Store, *countingFile) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.img")
	if err := firmware.DataPartition(context.Background(), p, 12<<20, plan.DataLabel, 1700000000); err != nil {
		labtest.SkipOrFail(t, "no data partition (mkfs.fat, mtools): %v", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, _ := f.Stat()
	cf := &countingFile{File: f}
	st, err := store.Open(cf, fi.Size(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, cf
}

// TestDHCPFloodCardWrites floods the real DHCP server (router/dhcp, its
// socket bound to a veth in a network namespace) with scripted DISCOVERs
// from 250 MACs for a pool of 100 addresses, as the flood did,
// and counts the card's writes on two stores: one behind the router's
// log path (the services' event limiter, then the board's batching
// writer, store.LogWriter, wired as boot wires it) and one written as the
// board did before, a record per line.
func TestDHCPFloodCardWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of some seconds in network namespaces")
	}
	srvNS, err := netns.New("flood-router")
	if err != nil {
		labtest.SkipOrFail(t, "network namespaces (root): %v", err)
	}
	defer srvNS.Close()
	cliNS, err := netns.New("flood-clients")
	if err != nil {
		t.Fatal(err)
	}
	defer cliNS.Close()
	if err := netns.Veth(srvNS, "lan0", "192.168.1.1/24", cliNS, "c0", "192.168.1.2/24"); err != nil {
		labtest.SkipOrFail(t, "veth: %v", err)
	}

	newSt, newDev := cardStore(t)
	oldSt, oldDev := cardStore(t)
	// The board's defaults scaled down 20 times, so that a 3-s flood
	// spans as many batch intervals as a minute does on the board.
	const scale = 20
	opts := store.LogWriterOptions{Interval: store.DefaultLogInterval / scale, UrgentGap: store.DefaultLogUrgentGap / scale}
	w := store.NewLogWriter(newSt, opts)
	var console atomic.Int64
	sink := func(urgent bool) func(string, ...any) {
		return func(format string, args ...any) {
			console.Add(1)
			line := store.Printable(fmt.Sprintf(format, args...))
			if urgent {
				w.AddNow(line)
			} else {
				w.Add(line)
			}
		}
	}
	s := &site.Site{Kind: "site", Hostname: "gw", LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24",
		DHCP: site.DHCP{Range: []string{"192.168.1.100", "192.168.1.199"}}}}
	r := newRouter(Config{Site: s, Log: sink(true), EventLog: sink(false)})

	cfg, err := dhcp.ServerConfigFromSite(s, "lan0")
	if err != nil {
		t.Fatal(err)
	}
	var raw atomic.Int64
	events := r.serviceLog() // what startDHCP gives the server
	var oldMu sync.Mutex
	cfg.Log = func(format string, args ...any) {
		raw.Add(1)
		oldMu.Lock()
		oldSt.Log(fmt.Sprintf(format, args...)) // before: a record per line
		oldMu.Unlock()
		events(format, args...)
	}
	srv, err := dhcp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srvNS.Do(func() error { return srv.Serve(ctx) }) }()
	defer func() {
		cancel()
		<-served
	}()

	var conn net.PacketConn
	if err := cliNS.Do(func() error {
		var err error
		conn, err = net.ListenPacket("udp4", "192.168.1.2:68")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	server := &net.UDPAddr{IP: net.IPv4(192, 168, 1, 1), Port: 67}
	var discovers [250][]byte
	for i := range discovers {
		d, err := dhcpv4.NewDiscovery(net.HardwareAddr{0x3c, 0, 0, 0, byte(i >> 8), byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		discovers[i] = d.ToBytes()
	}
	const flood = 3 * time.Second
	start := time.Now()
	rounds := 0
	for time.Since(start) < flood {
		for _, d := range discovers {
			if _, err := conn.WriteTo(d, server); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Microsecond) // a flood the server keeps up with
		}
		rounds++
	}
	// Let the server read what is queued, then stop as the board does:
	// the limiter says what it held back, the writer writes what waits.
	deadline := time.Now().Add(2 * time.Second)
	for last := int64(-1); raw.Load() != last && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = raw.Load()
	}
	elapsed := time.Since(start)
	r.flushEvents()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// The bound: one write per interval, one more at the start (nothing
	// waited before) and at Close, and one more for a run that wraps the
	// ring's end (the store's LogLines).
	bound := int64(elapsed/opts.Interval) + 3
	got, sectors := newDev.writes.Load(), newDev.sectors.Load()
	before := oldDev.writes.Load()
	t.Logf("%d rounds of 250 DISCOVERs in %v: the server logged %d lines; before: %d card writes; now %d lines reached the sink and %d card writes of %d sectors (bound %d, the board's defaults: %d a minute)",
		rounds, elapsed.Round(time.Millisecond), raw.Load(), before, console.Load(), got, sectors, bound, int(time.Minute/store.DefaultLogInterval)+1)
	if raw.Load() < 150 {
		t.Fatalf("the server logged %d lines: the flood did not reach it", raw.Load())
	}
	if got > bound {
		t.Errorf("%d card writes for the flood, want at most %d", got, bound)
	}
	if sectors > bound*int64(store.DefaultLogBatch) {
		t.Errorf("%d sectors written, want at most %d", sectors, bound*int64(store.DefaultLogBatch))
	}
	if before <= bound {
		t.Errorf("the old path made only %d writes (bound %d): the flood proves nothing", before, bound)
	}
	// What reached the card says what was held back.
	lines := readLogText(t, newDev.File)
	if !strings.Contains(lines, "more like this from 150 sources not logged in the last minute]") {
		t.Errorf("the card's log has no summary of the flood:\n%s", lines)
	}
}

// readLogText reads the log ring of the image as the host does.
func readLogText(t *testing.T, f *os.File) string {
	t.Helper()
	fi, _ := f.Stat()
	st, err := store.Open(f, fi.Size(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range st.Contents().Log {
		out = append(out, l.Text)
	}
	return strings.Join(out, "\n")
}
