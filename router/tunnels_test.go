package router

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/router/ipsec"
	"github.com/ocfw/ocfw/site"
)

// siteA is the examples' site A with two tunnels: a-b to site B and a-c
// to a peer on the WAN's own network.
func siteA() *site.Site {
	return &site.Site{
		Kind: "site", Board: "alix2d13", Hostname: "site-a",
		WAN: site.WAN{Port: "wan", Address: "198.51.100.2/24", Gateway: "198.51.100.1"},
		LAN: site.LAN{Ports: []string{"lan1"}, Address: "192.168.1.1/24"},
		Tunnels: []site.Tunnel{
			{Name: "a-b", Peer: "203.0.113.2", RemoteSubnet: "192.168.2.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha256", Keys: "a-b.keys"},
			{Name: "a-c", Peer: "198.51.100.9", LocalSubnet: "192.168.1.128/25", RemoteSubnet: "192.168.3.0/24", Cipher: "des-ede3-cbc", Auth: "hmac-sha1", Keys: "a-c.keys"},
		},
	}
}

func keyFile(t *testing.T, name, cipher, auth, a, b string) []byte {
	t.Helper()
	k, err := site.NewTunnelKeys(rand.Reader, name, cipher, auth, netip.MustParseAddr(a), netip.MustParseAddr(b), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	j, err := k.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// files is a card's ocfw folder.
type files map[string][]byte

func (f files) ReadFile(name string, max int64) ([]byte, error) {
	b, ok := f[name]
	if !ok {
		return nil, fmt.Errorf("fat: /ocfw/%s: %w", name, fs.ErrNotExist)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
	}
	return b, nil
}

// A key file turns into the tunnel the kernel gets, from this box's
// side; a missing, foreign or broken one leaves the tunnel down with a
// reason that says what to do.
func TestReadTunnelKeys(t *testing.T) {
	sc := siteA()
	ab := keyFile(t, "a-b", "aes-128-cbc", "hmac-sha256", "203.0.113.2", "198.51.100.2") // B made first: order must not matter
	var k site.TunnelKeys
	if err := json.Unmarshal(ab, &k); err != nil {
		t.Fatal(err)
	}
	r := newRouter(Config{Site: sc, Files: files{"a-b.keys": ab}})
	x, why := r.readTunnelKeys(sc.Tunnels[0])
	if x == nil {
		t.Fatalf("a-b: %s", why)
	}
	if x.Local != netip.MustParseAddr("198.51.100.2") || x.Remote != netip.MustParseAddr("203.0.113.2") ||
		x.LocalNet.String() != "192.168.1.0/24" || x.RemoteNet.String() != "192.168.2.0/24" {
		t.Errorf("tunnel %+v", x)
	}
	// A's out is the key file's direction from A, with its keys.
	out := k.SAs[1]
	if out.From != "198.51.100.2" {
		t.Fatalf("test: key file order %+v", k.SAs)
	}
	if got := fmt.Sprintf("0x%08x", x.Out.SPI); got != out.SPI || fmt.Sprintf("%x", x.Out.EncKey) != out.EncKey || fmt.Sprintf("%x", x.Out.AuthKey) != out.AuthKey {
		t.Errorf("out SA %+v, want the key file's %+v", x.Out, out)
	}
	if !x.Out.ESN || x.In.ReplayWindow != site.DefaultReplayWindow || x.In.Cipher != "aes-128-cbc" || x.In.Auth != "hmac-sha256" {
		t.Errorf("in SA %+v", x.In)
	}

	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{"no data partition", nil, "no data partition: the key file a-b.keys is read from the card's ocfw folder"},
		{"missing", files{}, "no key file a-b.keys in the card's ocfw folder (make it with ocfw tunnel keys"},
		{"another tunnel's", files{"a-b.keys": keyFile(t, "a-c", "aes-128-cbc", "hmac-sha256", "198.51.100.2", "203.0.113.2")}, `the key file is for tunnel "a-c"`},
		{"other ends", files{"a-b.keys": keyFile(t, "a-b", "aes-128-cbc", "hmac-sha256", "198.51.100.2", "203.0.113.3")},
			"the key file is between 198.51.100.2 and 203.0.113.3, the tunnel between 198.51.100.2 (local) and 203.0.113.2 (peer)"},
		{"other algorithms", files{"a-b.keys": keyFile(t, "a-b", "aes-256-cbc", "hmac-sha1", "198.51.100.2", "203.0.113.2")},
			"the key file's cipher is aes-256-cbc, the site's aes-128-cbc; tunnel a-b: the key file's auth is hmac-sha1"},
		{"cut short", files{"a-b.keys": ab[:len(ab)/2]}, "a-b.keys"},
		{"a key tampered", files{"a-b.keys": bytes.Replace(ab, []byte(`"enc_key": "`), []byte(`"enc_key": "zz`), 1)}, "enc_key: not hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter(Config{Site: sc, Files: tc.files})
			x, why := r.readTunnelKeys(sc.Tunnels[0])
			if x != nil || !strings.Contains(why, tc.want) {
				t.Errorf("tunnel %v, why %q; want none and %q", x, why, tc.want)
			}
		})
	}
}

// The remote subnet's route goes out of the WAN through its gateway, or
// straight to a peer on the WAN's network, with the LAN address as the
// source when the LAN address is inside the tunnel's local subnet.
func TestTunnelRoute(t *testing.T) {
	sc := siteA()
	gw := netip.MustParseAddr("198.51.100.1")
	wan := wanState{Addr: netip.MustParsePrefix("198.51.100.2/24"), Gateway: gw}
	for _, tc := range []struct {
		name   string
		tunnel int
		wan    wanState
		want   string // route, or the error
	}{
		{"through the gateway", 0, wan, "192.168.2.0/24 via 198.51.100.1 src 192.168.1.1"},
		{"peer on the WAN's network, LAN address outside the local subnet", 1, wan, "192.168.3.0/24 via 198.51.100.9"},
		{"no gateway, peer elsewhere", 0, wanState{Addr: wan.Addr}, "the peer 203.0.113.2 is not on the WAN's network 198.51.100.0/24 and the WAN has no gateway"},
		{"no gateway, peer on-link", 1, wanState{Addr: wan.Addr}, "192.168.3.0/24 via 198.51.100.9"},
		{"no WAN address", 0, wanState{}, "the WAN has no address yet"},
		{"another WAN address", 0, wanState{Addr: netip.MustParsePrefix("198.51.100.77/24"), Gateway: gw},
			"the WAN's address is 198.51.100.77, the tunnel's local end 198.51.100.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := sc.TunnelAddrs(sc.Tunnels[tc.tunnel])
			if err != nil {
				t.Fatal(err)
			}
			rt, err := tunnelRoute(sc, a, tc.wan, nil)
			got := rt.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// ocf net's tunnel lines: state, what it joins, counters per direction,
// errors spelled out, and a silent peer pointed out.
func TestTunnelText(t *testing.T) {
	st := Status{Hostname: "site-a", Tunnels: []TunnelState{
		{Name: "a-b", Peer: "203.0.113.2", LocalSubnet: "192.168.1.0/24", RemoteSubnet: "192.168.2.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha256", Keys: "a-b.keys", State: "up",
			Out: &SAState{SPI: "0x00001234", Packets: 7, Bytes: 700}, In: &SAState{SPI: "0x00005678", Packets: 6, Bytes: 650, Errors: 2, ReplayDrops: 1, IntegrityFailed: 1}},
		{Name: "a-c", Peer: "192.0.2.2", LocalSubnet: "192.168.1.0/24", RemoteSubnet: "192.168.3.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha1", Keys: "a-c.keys", State: "up",
			Out: &SAState{SPI: "0x00000100", Packets: 3, Bytes: 252}, In: &SAState{SPI: "0x00000101"}},
		{Name: "a-d", Peer: "192.0.2.3", RemoteSubnet: "192.168.4.0/24", Cipher: "aes-128-cbc", Auth: "hmac-sha1", Keys: "a-d.keys", State: "down: no key file a-d.keys"},
	}}
	var b strings.Builder
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"tunnel a-b: up; peer 203.0.113.2, 192.168.1.0/24 <-> 192.168.2.0/24, aes-128-cbc hmac-sha256, keys a-b.keys\n" +
			"  out spi 0x00001234: 7 packets, 700 bytes, 0 errors\n" +
			"  in  spi 0x00005678: 6 packets, 650 bytes, 2 errors (replayed 1, outside the window 0, integrity failed 1)\n" +
			"tunnel a-c: up;",
		"  in  spi 0x00000101: 0 packets, 0 bytes, 0 errors\n  nothing received from the peer yet\n",
		"tunnel a-d: down: no key file a-d.keys; peer 192.0.2.3, - <-> 192.168.4.0/24, aes-128-cbc hmac-sha1, keys a-d.keys\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("ocf net lacks\n%s\nin\n%s", want, b.String())
		}
	}
}

// The inbound SA's refusals tell a peer that restarted without its
// counters (packets with these keys got through before, now they fail
// their ICV or fall behind the window) from one with other keys (none
// ever got through); ocf net shows what was found.
func TestPeerProblem(t *testing.T) {
	sc := siteA()
	ab := keyFile(t, "a-b", "aes-128-cbc", "hmac-sha256", "198.51.100.2", "203.0.113.2")
	r := newRouter(Config{Site: sc, Files: files{"a-b.keys": ab}})
	x, why := r.readTunnelKeys(sc.Tunnels[0])
	if x == nil {
		t.Fatal(why)
	}
	behind := "did the peer restart without its counters"
	keys := "do both ends have the same key file?"
	for _, c := range []struct {
		name  string
		in    ipsec.SACounters
		saved uint64 // the inbound counter in the store from earlier boots
		want  string
	}{
		{"other keys", ipsec.SACounters{IntegrityFailed: 5}, 0, "5 packet(s) from 203.0.113.2 failed the integrity check: " + keys},
		{"peer restarted", ipsec.SACounters{Packets: 400, IntegrityFailed: 20}, 0, "20 packet(s) from 203.0.113.2 failed the integrity check after others with the same keys got through: likely sequence numbers behind this end's window: " + behind},
		{"peer restarted while this end did", ipsec.SACounters{IntegrityFailed: 3}, 400, "3 packet(s) from 203.0.113.2 failed the integrity check after others with the same keys got through"},
		{"behind the window", ipsec.SACounters{Packets: 9, WindowDrops: 2}, 0, "2 packet(s) from 203.0.113.2 with sequence numbers behind this end's window: " + behind},
		{"nothing refused", ipsec.SACounters{Packets: 9}, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := &memValues{v: map[string]json.RawMessage{}}
			if c.saved > 0 {
				v.SetValue(ipsec.SeqValue, map[string]any{"keys": map[string]any{ipsec.KeyID(*x): map[string]any{"out": 1 << 22, "in": c.saved}}})
			}
			ts := &tunnelSet{seqs: ipsec.NewSeqs(v, "")}
			run := &tunnelRun{site: sc.Tunnels[0], x: x, state: "up"}
			got := r.peerProblem(ts, run, ipsec.TunnelCounters{In: c.in})
			if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
			if again := r.peerProblem(ts, run, ipsec.TunnelCounters{In: c.in}); again != "" {
				t.Errorf("the same counters again: %q, want nothing new", again)
			}
			run.problem = got
			ts.list = []*tunnelRun{run}
			st := Status{Tunnels: ts.status(func(string) string { return "" })}
			var b strings.Builder
			st.WriteText(&b)
			if got != "" && !strings.Contains(b.String(), "\n  "+got+"\n") {
				t.Errorf("ocf net lacks the problem:\n%s", b.String())
			}
		})
	}
}

// A store found lost (store.Store's StateLost) lost the tunnels' counters
// too: keys without a record are refused then, with what to do; keys with
// one, and any keys in an intact store, are not.
func TestTunnelSeqsKnowTheStoreWasLost(t *testing.T) {
	sc := siteA()
	ab := keyFile(t, "a-b", "aes-128-cbc", "hmac-sha256", "198.51.100.2", "203.0.113.2")
	r := newRouter(Config{Site: sc, Files: files{"a-b.keys": ab}})
	x, why := r.readTunnelKeys(sc.Tunnels[0])
	if x == nil {
		t.Fatal(why)
	}
	if tunnelSeqs(nil) != nil {
		t.Error("sequence numbers kept without a store")
	}
	for _, c := range []struct {
		lost, record bool
		want         string
	}{
		{false, false, ""},
		{true, true, ""},
		{true, false, "its sequence numbers cannot be trusted: the card's store lost its state (no state copy was readable: damage, not a power cut); so that the peer does not drop every packet, roll the keys: make a new key file with ocfw tunnel keys on the PC, copy it to both cards (ocfw folder) and restart both boxes"},
	} {
		v := &memValues{v: map[string]json.RawMessage{}, lost: c.lost}
		if c.record {
			v.SetValue(ipsec.SeqValue, map[string]any{"keys": map[string]any{ipsec.KeyID(*x): map[string]any{"out": 1 << 22, "in": 9}}})
		}
		err := tunnelSeqs(v).Trusted(*x)
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
			t.Errorf("lost %v, record %v: %v, want %q", c.lost, c.record, err, c.want)
		}
	}
}
