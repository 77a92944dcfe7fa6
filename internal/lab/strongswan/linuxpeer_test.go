package strongswan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/cli"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/router/ipsec"
	"github.com/ocfw/ocfw/site"
)

// manualReply is the world agent's answer to manual (its ManualReply).
type manualReply struct {
	Counters          ipsec.TunnelCounters
	SavedOut, SavedIn uint64
	Saved             bool
}

// testLinuxPeerManualKeys is issue 21 point 1's Linux peer: the lines
// `ocfw tunnel keys --peer-commands` prints for examples/sites' site B
// are run, word for word as a shell splits them, with Debian's ip
// (iproute2 6.1, from the tree) in one namespace of world w; site A's
// end is the router's (router/ipsec through its Seqs and a store file,
// the agent's manual command) in another, a third routes between the
// two WANs. TCP both ways between the LANs' addresses crosses the
// tunnel; then the ocfw end restarts (its SAs out, then in again from
// the store's reservation) and TCP crosses both ways again, with no
// packet refused by either end (the finding was the survivor refusing
// every one). Once per cipher and integrity pair the examples can
// name: AES-CBC with SHA2-256, 3DES with SHA1; and once with the
// tunnel carrying IPv6 networks over the IPv4 WANs (the printed states'
// flag af-unspec, the route onto the link without a gateway).
//
// It runs in TestTwoCharons' world: the namespaces are its own, and a
// boot of its own would cost more than the test.
func testLinuxPeerManualKeys(t *testing.T, w *worldvm.World) {
	for i, c := range []struct {
		cipher, auth string
		v6           bool
	}{
		{"aes-128-cbc", "hmac-sha256", false},
		{"des-ede3-cbc", "hmac-sha1", false},
		{"aes-128-cbc", "hmac-sha256", true},
	} {
		name := c.cipher + "+" + c.auth
		if c.v6 {
			name = "IPv6-nets-over-IPv4+" + name
		}
		t.Run(name, func(t *testing.T) {
			linuxPeer(t, w, fmt.Sprint(i), c.cipher, c.auth, c.v6)
		})
	}
}

// The inner addresses: the LANs' (IPv4) or, with v6, a ULA /64 each.
type innerNets struct{ netA, netB, hostA, hostB string }

var (
	inner4 = innerNets{"192.168.1.0/24", "192.168.2.0/24", "192.168.1.1", "192.168.2.1"}
	inner6 = innerNets{"fd00:1::/64", "fd00:2::/64", "fd00:1::1", "fd00:2::1"}
)

func linuxPeer(t *testing.T, w *worldvm.World, n, cipher, auth string, v6 bool) {
	in := inner4
	if v6 {
		in = inner6
	}
	// The two example sites with the cipher and auth asked for.
	dir := t.TempDir()
	for _, f := range []string{"site-a.yaml", "site-b.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../../examples/sites", f))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(data), "cipher: aes-128-cbc", "cipher: "+cipher, 1)
		s = strings.Replace(s, "auth: hmac-sha256", "auth: "+auth, 1)
		if !strings.Contains(s, "cipher: "+cipher) || !strings.Contains(s, "auth: "+auth) {
			t.Fatalf("%s no longer names the cipher and auth this test replaces", f)
		}
		if v6 {
			// The tunnel's networks become IPv6 ones, the WANs stay.
			local, remote := inner6.netA, inner6.netB
			if f == "site-b.yaml" {
				local, remote = remote, local
				s = strings.Replace(s, "    remote_subnet: 192.168.1.0/24", "    local_subnet: "+local+"\n    remote_subnet: "+remote, 1)
			} else {
				s = strings.Replace(s, "local_subnet: 192.168.1.0/24", "local_subnet: "+local, 1)
				s = strings.Replace(s, "remote_subnet: 192.168.2.0/24", "remote_subnet: "+remote, 1)
			}
			if !strings.Contains(s, "local_subnet: "+local) || !strings.Contains(s, "remote_subnet: "+remote) {
				t.Fatalf("%s no longer has the subnets this test replaces", f)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	siteA, siteB := filepath.Join(dir, "site-a.yaml"), filepath.Join(dir, "site-b.yaml")
	var out, errs bytes.Buffer
	if code := cli.Run(context.Background(), []string{"tunnel", "keys", "--site", siteA, "--site", siteB, "--peer-commands"}, &out, &errs); code != 0 {
		t.Fatalf("ocfw tunnel keys --peer-commands: exit %d\n%s", code, errs.String())
	}
	tun := siteTunnel(t, siteA)
	tunJSON := worldvm.Quote(mustJSON(t, tun))

	// ma: site A's box (198.51.100.2, LAN 192.168.1.1); mb: the Linux
	// peer in site B's place (203.0.113.2, LAN 192.168.2.1); mi: the
	// internet between them, both sites' gateway.
	ma, mb, mi := "ma"+n, "mb"+n, "mi"+n
	for _, c := range []string{
		"ns " + ma, "ns " + mb, "ns " + mi,
		"veth " + ma + " a0 " + mi + " i0", "veth " + mb + " b0 " + mi + " i1",
		"addr " + ma + " a0 198.51.100.2/24", "addr " + mi + " i0 198.51.100.1/24",
		"addr " + mb + " b0 203.0.113.2/24", "addr " + mi + " i1 203.0.113.1/24",
		"sysctl " + mi + " net.ipv4.ip_forward 1",
		"route " + ma + " default 198.51.100.1", "route " + mb + " default 203.0.113.1",
		"addr " + ma + " lo " + in.hostA + "/" + bits(in.hostA), "addr " + mb + " lo " + in.hostB + "/" + bits(in.hostB),
		"echo-server " + ma + " 7", "echo-server " + mb + " 7",
	} {
		w.MustDo(t, c)
	}
	store := "/tmp/linuxpeer-" + n + ".store"
	manual := func(action string) manualReply {
		t.Helper()
		var r manualReply
		s := w.MustDo(t, fmt.Sprintf("manual %s %s %s %s", ma, store, action, tunJSON))
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("manual %s: %v: %s", action, err, s)
		}
		return r
	}
	// The router's end: new keys start from 0 with a reservation ahead.
	r := manual("install")
	if r.Counters.Out.Seq != 0 || !r.Saved || r.SavedOut != ipsec.Reserve {
		t.Fatalf("ocfw end installed: %+v, want counters from 0 and a reservation of %d", r, ipsec.Reserve)
	}
	// ... and its route to the remote LAN, as the router sets it (the
	// agent's route takes no source: Debian's ip does it here too).
	if v6 {
		// A v6 net over the v4 WAN: onto the link, no gateway, as
		// the router's tunnelRoute makes it.
		w.MustDo(t, "exec "+ma+" LD_LIBRARY_PATH="+LibraryPath+" "+IP+" route add "+in.netB+" dev a0 src "+in.hostA)
	} else {
		w.MustDo(t, "exec "+ma+" LD_LIBRARY_PATH="+LibraryPath+" "+IP+" route add 192.168.2.0/24 via 198.51.100.1 src 192.168.1.1")
	}

	// The Linux peer: every printed command as printed.
	var ran int
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		words := shellWords(t, line)
		if words[0] != "ip" {
			t.Fatalf("a printed command that is not ip: %s", line)
		}
		if _, err := w.Do(context.Background(), "exec "+mb+" LD_LIBRARY_PATH="+LibraryPath+" "+IP+" "+strings.Join(quoteAll(words[1:]), " ")); err != nil {
			t.Fatalf("the Linux peer refused a printed command: %s\n%v", line, err)
		}
		ran++
	}
	if ran != 5 {
		t.Fatalf("ran %d printed commands, want 5 (two SAs, three policies):\n%s", ran, out.String())
	}
	// The route the printed comment asks for.
	if v6 {
		if !strings.Contains(out.String(), "ip route add "+in.netA+" dev WAN-INTERFACE src LAN-ADDRESS") || strings.Count(out.String(), "flag af-unspec") != 2 {
			t.Errorf("the printed commands lack flag af-unspec on both states or the gateway-less route:\n%s", out.String())
		}
		w.MustDo(t, "exec "+mb+" LD_LIBRARY_PATH="+LibraryPath+" "+IP+" route add "+in.netA+" dev b0 src "+in.hostB)
	} else {
		if !strings.Contains(out.String(), "ip route add 192.168.1.0/24 via GATEWAY src LAN-ADDRESS") {
			t.Errorf("the printed comment no longer asks for the route this test adds:\n%s", out.String())
		}
		w.MustDo(t, "exec "+mb+" LD_LIBRARY_PATH="+LibraryPath+" "+IP+" route add 192.168.1.0/24 via 203.0.113.1 src 192.168.2.1")
	}

	traffic := func(when string) {
		t.Helper()
		for _, c := range []struct{ ns, to, from string }{{mb, in.hostA, in.hostB}, {ma, in.hostB, in.hostA}} {
			to, from := c.to, c.from
			if v6 {
				to, from = "["+to+"]", "["+from+"]"
			}
			reply, err := w.Do(context.Background(), fmt.Sprintf("tcp %s %s:7 %s", c.ns, to, "through-the-tunnel"))
			if err != nil || !strings.Contains(reply, "from "+from+":") || !strings.Contains(reply, "through-the-tunnel") {
				t.Fatalf("%s: TCP from %s to %s: %v %q", when, c.from, c.to, err, reply)
			}
		}
		r := manual("check")
		co := r.Counters
		if co.Out.Packets == 0 || co.In.Packets == 0 || co.In.Errors() != 0 {
			t.Errorf("%s: ocfw end's SAs: %+v, want packets both ways and none refused", when, co)
		}
		peerStats(t, w, mb, when)
		t.Logf("%s: ocfw end out seq %d (%d packets), in seq %d (%d packets); store: out %d in %d",
			when, co.Out.Seq, co.Out.Packets, co.In.Seq, co.In.Packets, r.SavedOut, r.SavedIn)
	}
	traffic("before the restart")

	before := manual("check")
	w.MustDo(t, fmt.Sprintf("manual %s %s remove %s", ma, store, tunJSON))
	after := manual("install")
	if after.Counters.Out.Seq != before.SavedOut || after.Counters.In.Seq != before.SavedIn ||
		after.SavedOut != before.SavedOut+ipsec.Reserve {
		t.Errorf("ocfw end restarted at out %d in %d, reservation now %d; want out %d in %d (the store's), reservation %d",
			after.Counters.Out.Seq, after.Counters.In.Seq, after.SavedOut, before.SavedOut, before.SavedIn, before.SavedOut+ipsec.Reserve)
	}
	traffic("after the ocfw end restarted")
}

// bits is a host prefix's length: 32 or 128.
func bits(a string) string {
	if strings.Contains(a, ":") {
		return "128"
	}
	return "32"
}

// siteTunnel is the site config's tunnel with its key file as site A's
// router installs it (router's tunnelFromKeys).
func siteTunnel(t *testing.T, file string) ipsec.Tunnel {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := cat.ParseSite(file, data)
	if err != nil {
		t.Fatal(err)
	}
	st := s.Tunnels[0]
	kdata, err := os.ReadFile(filepath.Join(filepath.Dir(file), st.Keys))
	if err != nil {
		t.Fatal(err)
	}
	keys, errs := site.ReadTunnelKeys(st.Keys, kdata)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ts, errs := st.Setup(s, keys)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sa := func(k site.SAKeys) ipsec.SA {
		return ipsec.SA{SPI: k.SPI, Cipher: ts.Cipher, Auth: ts.Auth, EncKey: k.EncKey, AuthKey: k.AuthKey,
			ReplayWindow: uint32(ts.ReplayWindow), ESN: ts.ESN}
	}
	x := ipsec.Tunnel{Name: ts.Name, Local: ts.Local, Remote: ts.Peer, LocalNet: ts.LocalSubnet, RemoteNet: ts.RemoteSubnet,
		Out: sa(ts.Out), In: sa(ts.In)}
	if err := x.Validate(); err != nil {
		t.Fatal(err)
	}
	return x
}

// shellWords splits a printed command line as the shell a user pastes it
// into does (the host's sh: the world has none).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `eval "set -- $1"; printf '%s\0' "$@"`, "sh", line).Output()
	if err != nil {
		t.Fatalf("sh cannot split %q: %v", line, err)
	}
	words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(words) == 0 || words[0] == "" {
		t.Fatalf("sh split %q into nothing", line)
	}
	return words
}

var ipStatsRe = regexp.MustCompile(`replay-window (\d+) replay (\d+) failed (\d+)`)

// peerStats checks with Debian's `ip -s xfrm state` that the Linux
// peer's two SAs refused nothing: no packet outside the window, none
// replayed, none failing its integrity check.
func peerStats(t *testing.T, w *worldvm.World, ns, when string) {
	t.Helper()
	st := w.MustDo(t, "exec "+ns+" LD_LIBRARY_PATH="+LibraryPath+" "+IP+" -s xfrm state")
	m := ipStatsRe.FindAllStringSubmatch(st, -1)
	if len(m) != 2 {
		t.Fatalf("%s: ip -s xfrm state on the Linux peer: want two SAs' stats, found %d:\n%s", when, len(m), st)
	}
	for _, x := range m {
		if x[1] != "0" || x[2] != "0" || x[3] != "0" {
			t.Errorf("%s: the Linux peer refused packets (%s):\n%s", when, x[0], st)
		}
	}
}
