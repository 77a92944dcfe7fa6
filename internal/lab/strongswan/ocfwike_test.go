package strongswan

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/worldvm"
	"github.com/ocfw/ocfw/router/ike"
)

// ikeStatus is the world agent's ike-status answer.
type ikeStatus struct {
	Peers              []ike.PeerStatus
	Installed, Deleted []string
	Log                string
}

// The PSK and identities of testdata's west and east swanctl.conf.
const testPSK = "test-only psk, not a secret: 6c1b9e0f2a"

// TestOCFWAgainstStrongswan runs ocfw's IKEv2 endpoint (router/ike, in
// the world agent) against unmodified strongSwan 5.9.8 in one world VM,
// PSK with aes128-sha256-modp2048 and ESP aes128-sha256: ocfw initiating
// to a charon responder (testdata/east.swanctl.conf), and a charon
// initiating with swanctl to ocfw (testdata/west.swanctl.conf). The two
// pairs live in separate pairs of namespaces, so both reuse the
// addresses of the files. Both ends must show the IKE SA established
// with the same suite and one CHILD SA whose SPIs pair up.
func TestOCFWAgainstStrongswan(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a world VM with strongSwan; skipped with -short")
	}
	root := fetchTest(t)
	east, west := Instance{Name: "east", NS: "east"}, Instance{Name: "west", NS: "west"}
	w := StartWorld(t, "swanike", root, map[Instance][]byte{west: readTestdata(t, "west.swanctl.conf"), east: readTestdata(t, "east.swanctl.conf")})
	ctx := context.Background()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range []string{"ocfw-w", "ocfw-e"} {
			if out, err := w.Do(ctx, "ike-status "+n); err == nil {
				t.Logf("ocfw %s: %s", n, out)
			}
		}
	})
	// ow (ocfw, 192.0.2.1) -- east (charon responder, 192.0.2.2);
	// west (charon initiator, 192.0.2.1) -- oe (ocfw, 192.0.2.2).
	for _, c := range []string{
		"ns ow", "ns east", "veth ow o0 east e0",
		"addr ow o0 192.0.2.1/24", "addr east e0 192.0.2.2/24",
		"ns west", "ns oe", "veth west w0 oe o0",
		"addr west w0 192.0.2.1/24", "addr oe o0 192.0.2.2/24",
		// The inner addresses: charon's routes for its CHILD SA take
		// its own as their source; ocfw's side answers echo requests
		// whose source the connection fixes, and needs only a route.
		"addr ow lo 10.1.0.1/32", "addr east lo 10.2.0.1/32", "echo-server ow 7",
		"route ow 10.2.0.0/24 192.0.2.2",
		"addr west lo 10.1.0.1/32", "addr oe lo 10.2.0.1/32", "echo-server oe 7",
		"route oe 10.1.0.0/24 192.0.2.1",
	} {
		w.MustDo(t, c)
	}
	for _, in := range []Instance{west, east} {
		if err := in.Start(ctx, w); err != nil {
			t.Fatal(err)
		}
		if out := w.MustDo(t, in.SwanctlCommand("--load-all")); !strings.Contains(out, "loaded connection") {
			t.Fatalf("%s: swanctl load-all: %s", in.Name, out)
		}
	}
	const (
		swanIKE  = "AES_CBC-128/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_2048"
		swanESP  = "ESP:AES_CBC-128/HMAC_SHA2_256_128"
		ocfwIKE  = "AES-CBC-128/HMAC-SHA2-256-128/PRF-HMAC-SHA2-256/MODP-2048"
		ocfwESP  = "AES-CBC-128/HMAC-SHA2-256-128"
		proposal = "aes128-sha256-modp2048"
	)
	wcfg := map[string]any{"name": "east", "local": "192.0.2.1", "remote": "192.0.2.2",
		"local_id": "west.example", "remote_id": "east.example", "psk": testPSK,
		"ike": proposal, "esp": "aes128-sha256", "local_ts": "10.1.0.0/24", "remote_ts": "10.2.0.0/24",
		"install": true}

	t.Run("ocfw-initiates", func(t *testing.T) {
		cfg := clone(wcfg)
		cfg["initiate"] = true
		start := time.Now()
		w.MustDo(t, "ike ow ocfw-w "+worldvm.Quote(mustJSON(t, cfg)))
		sas := waitSAs(t, w, east, "ocfw-w")
		t.Logf("established in %v; charon east:\n%s", time.Since(start).Round(time.Millisecond), sas)
		checkPair(t, w, "ocfw-w", sas, true, swanIKE, swanESP, ocfwIKE, ocfwESP)
		checkTraffic(t, w, east, "10.1.0.1")
	})
	t.Run("strongswan-initiates", func(t *testing.T) {
		cfg := clone(wcfg)
		cfg["name"], cfg["local"], cfg["remote"] = "west", "192.0.2.2", "192.0.2.1"
		cfg["local_id"], cfg["remote_id"] = "east.example", "west.example"
		cfg["local_ts"], cfg["remote_ts"] = "10.2.0.0/24", "10.1.0.0/24"
		cfg["dpd"] = "2s"
		w.MustDo(t, "ike oe ocfw-e "+worldvm.Quote(mustJSON(t, cfg)))
		start := time.Now()
		out, err := w.Do(ctx, west.SwanctlCommand("--initiate", "--child", "net", "--timeout", "30"))
		if err != nil || !strings.Contains(out, "initiate completed successfully") {
			t.Fatalf("swanctl initiate against ocfw: %v\n%s", err, out)
		}
		t.Logf("swanctl initiate completed in %v", time.Since(start).Round(time.Millisecond))
		sas := waitSAs(t, w, west, "ocfw-e")
		t.Logf("charon west:\n%s", sas)
		checkPair(t, w, "ocfw-e", sas, false, swanIKE, swanESP, ocfwIKE, ocfwESP)
		checkTraffic(t, w, west, "10.2.0.1")
		// charon floated to 4500 for IKE_AUTH (no NAT): ocfw must answer
		// from and to that port (RFC 7296 2.11).
		if log := w.MustDo(t, "output charon-west"); !strings.Contains(log, "received packet: from 192.0.2.2[4500] to 192.0.2.1[4500]") {
			t.Errorf("charon west never got ocfw's IKE_AUTH response on port 4500:\n%s", log)
		}
		// ocfw's own requests after the float: its liveness check (every
		// 2 s of silence) must be answered by charon.
		var st ikeStatus
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			if err := json.Unmarshal([]byte(w.MustDo(t, "ike-status ocfw-e")), &st); err != nil {
				t.Fatal(err)
			}
			sa := st.Peers[0].SAs[0]
			if sa.LastInbound.Sub(sa.Established) > 3*time.Second && sa.Alive {
				t.Logf("ocfw heard charon %v after establishing (liveness checks answered)", sa.LastInbound.Sub(sa.Established).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ocfw's liveness checks went unanswered: %+v\nlog:\n%s", sa, st.Log)
			}
		}
		log := w.MustDo(t, "output charon-west")
		if !strings.Contains(log, "parsed INFORMATIONAL request") {
			t.Errorf("charon west logged no INFORMATIONAL request from ocfw:\n%s", log)
		}
		t.Logf("charon west: %s", lastLine(log, "parsed INFORMATIONAL request"))
	})
	// The other groups, ciphers and integrity algorithms, ocfw initiating
	// (east accepts them all): a new endpoint in ow each time, after
	// charon forgot the last IKE SA; traffic through each.
	for _, c := range []struct{ ike, esp string }{
		{"aes128-sha256-ecp256", "aes192-sha256"},
		{"aes256-sha1-curve25519", "aes256-sha1"},
		{"3des-sha1-modp2048", "3des-sha1"},
		{"aes192-sha256-curve25519", "3des-sha256"},
	} {
		t.Run("ocfw-initiates-"+c.ike+"-esp-"+c.esp, func(t *testing.T) {
			w.MustDo(t, "ike-stop ocfw-w")
			// The stopped endpoint never answers charon's DELETE: swanctl
			// may report a failure, what counts is that the SA is gone.
			w.Do(ctx, east.SwanctlCommand("--terminate", "--ike", "west", "--force"))
			for deadline := time.Now().Add(10 * time.Second); strings.Contains(w.MustDo(t, east.SwanctlCommand("--list-sas")), "ESTABLISHED"); {
				if time.Now().After(deadline) {
					t.Fatal("charon east keeps the IKE SA of the stopped endpoint")
				}
				time.Sleep(300 * time.Millisecond)
			}
			cfg := clone(wcfg)
			cfg["initiate"], cfg["ike"], cfg["esp"] = true, c.ike, c.esp
			w.MustDo(t, "ike ow ocfw-w "+worldvm.Quote(mustJSON(t, cfg)))
			sas := waitSAs(t, w, east, "ocfw-w")
			si, oi := suiteNames(t, c.ike, true)
			se, oe := suiteNames(t, c.esp, false)
			checkPair(t, w, "ocfw-w", sas, true, si, "ESP:"+se, oi, oe)
			checkTraffic(t, w, east, "10.1.0.1")
		})
	}
	ipv6Tunnels(t, w, east, wcfg)
}

// ipv6Tunnels are TestOCFWAgainstStrongswan's IPv6 subtests, in its
// world (no boot of their own): ocfw initiating to charon east with IPv6
// networks over the IPv4 WAN (east's child net6) and between IPv6 WAN
// addresses (east's connection west6), then two ocfw endpoints with each
// other, both ways, and only ESP on their link. Each carries an echo
// through the tunnel.
func ipv6Tunnels(t *testing.T, w *worldvm.World, east Instance, wcfg map[string]any) {
	ctx := context.Background()
	for _, c := range []string{
		"addr ow o0 2001:db8::1/64", "addr east e0 2001:db8::2/64",
		"addr ow lo fd00:1::1/128", "addr east lo fd00:2::1/128",
		"addr ow lo fd00:11::1/128", "addr east lo fd00:12::1/128",
		// ocfw's routes are the router's for an IPv6 remote network:
		// onto the link, no gateway, the inner source. charon
		// installs its own; these are its fallback in the main table.
		"route ow fd00:2::/64 dev:o0 fd00:1::1", "route ow fd00:12::/64 dev:o0 fd00:11::1",
		"route east fd00:1::/64 dev:e0 fd00:2::1", "route east fd00:11::/64 dev:e0 fd00:12::1",
	} {
		w.MustDo(t, c)
	}
	// stop ends ocfw endpoint name and charon's IKE SA ike with it.
	stop := func(t *testing.T, name, ike string) {
		w.MustDo(t, "ike-stop "+name)
		w.Do(ctx, east.SwanctlCommand("--terminate", "--ike", ike, "--force"))
		for deadline := time.Now().Add(10 * time.Second); strings.Contains(w.MustDo(t, east.SwanctlCommand("--list-sas")), "ESTABLISHED"); {
			if time.Now().After(deadline) {
				t.Fatal("charon east keeps the IKE SA of the stopped endpoint")
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	suite := func(t *testing.T) (si, se, oi, oe string) {
		si, oi = suiteNames(t, "aes128-sha256-modp2048", true)
		se, oe = suiteNames(t, "aes128-sha256", false)
		return si, "ESP:" + se, oi, oe
	}
	t.Run("IPv6-nets-over-IPv4-ocfw-initiates", func(t *testing.T) {
		stop(t, "ocfw-w", "west")
		cfg := clone(wcfg)
		cfg["initiate"], cfg["ike"], cfg["esp"] = true, "aes128-sha256-modp2048", "aes128-sha256"
		cfg["local_ts"], cfg["remote_ts"] = "fd00:1::/64", "fd00:2::/64"
		w.MustDo(t, "ike ow ocfw-w "+worldvm.Quote(mustJSON(t, cfg)))
		sas := waitSAs(t, w, east, "ocfw-w")
		si, se, oi, oe := suite(t)
		checkPair(t, w, "ocfw-w", sas, true, si, se, oi, oe)
		if !regexp.MustCompile(`(?s)west: .*@ 192\.0\.2\.2\[.*net6: .*local\s+fd00:2::/64\s+remote\s+fd00:1::/64`).MatchString(sas) {
			t.Errorf("charon's CHILD SA is not net6, fd00:2::/64 <-> fd00:1::/64, in west over 192.0.2.2:\n%s", sas)
		}
		checkTraffic(t, w, east, "[fd00:1::1]")
		stop(t, "ocfw-w", "west")
	})
	t.Run("IPv6-WAN-ocfw-initiates", func(t *testing.T) {
		cfg := clone(wcfg)
		cfg["name"], cfg["local"], cfg["remote"] = "east6", "2001:db8::1", "2001:db8::2"
		cfg["initiate"], cfg["ike"], cfg["esp"] = true, "aes128-sha256-modp2048", "aes128-sha256"
		cfg["local_ts"], cfg["remote_ts"] = "fd00:11::/64", "fd00:12::/64"
		w.MustDo(t, "ike ow ocfw-w6 "+worldvm.Quote(mustJSON(t, cfg)))
		sas := waitSAs(t, w, east, "ocfw-w6")
		si, se, oi, oe := suite(t)
		checkPair(t, w, "ocfw-w6", sas, true, si, se, oi, oe)
		if !regexp.MustCompile(`(?s)west6: .*@ 2001:db8::2\[.*@ 2001:db8::1\[.*net6: .*local\s+fd00:12::/64\s+remote\s+fd00:11::/64`).MatchString(sas) {
			t.Errorf("charon's IKE SA is not west6 between 2001:db8::2 and 2001:db8::1 carrying fd00:12::/64 <-> fd00:11::/64:\n%s", sas)
		}
		checkTraffic(t, w, east, "[fd00:11::1]")
		stop(t, "ocfw-w6", "west6")
	})
	t.Run("IPv6-ocfw-to-ocfw", func(t *testing.T) {
		// a6 and b6: two ocfw endpoints each, one pair over the IPv4
		// link carrying fd00:a::/64 <-> fd00:b::/64, one over the IPv6
		// link carrying fd00:c::/64 <-> fd00:d::/64, with the default
		// ids (the addresses: ID_IPV4_ADDR and ID_IPV6_ADDR).
		for _, c := range []string{
			"ns a6", "ns b6", "veth a6 a0 b6 b0",
			"addr a6 a0 198.51.100.1/24", "addr b6 b0 198.51.100.2/24",
			"addr a6 a0 2001:db8:6::1/64", "addr b6 b0 2001:db8:6::2/64",
			"addr a6 lo fd00:a::1/128", "addr a6 lo fd00:c::1/128",
			"addr b6 lo fd00:b::1/128", "addr b6 lo fd00:d::1/128",
			"route a6 fd00:b::/64 dev:a0 fd00:a::1", "route a6 fd00:d::/64 dev:a0 fd00:c::1",
			"route b6 fd00:a::/64 dev:b0 fd00:b::1", "route b6 fd00:c::/64 dev:b0 fd00:d::1",
			"echo-server b6 7",
		} {
			w.MustDo(t, c)
		}
		base := map[string]any{"psk": testPSK, "ike": "aes128-sha256-curve25519", "esp": "aes128-sha256", "install": true}
		pair := []struct{ ns, name, local, remote, lts, rts string }{
			{"b6", "ocfw-b4", "198.51.100.2", "198.51.100.1", "fd00:b::/64", "fd00:a::/64"},
			{"b6", "ocfw-b6", "2001:db8:6::2", "2001:db8:6::1", "fd00:d::/64", "fd00:c::/64"},
			{"a6", "ocfw-a4", "198.51.100.1", "198.51.100.2", "fd00:a::/64", "fd00:b::/64"},
			{"a6", "ocfw-a6", "2001:db8:6::1", "2001:db8:6::2", "fd00:c::/64", "fd00:d::/64"},
		}
		for _, p := range pair {
			cfg := clone(base)
			cfg["name"], cfg["local"], cfg["remote"], cfg["local_ts"], cfg["remote_ts"] = p.name+"-peer", p.local, p.remote, p.lts, p.rts
			cfg["initiate"] = p.ns == "a6"
			w.MustDo(t, "ike "+p.ns+" "+p.name+" "+worldvm.Quote(mustJSON(t, cfg)))
		}
		for _, name := range []string{"ocfw-a4", "ocfw-a6", "ocfw-b4", "ocfw-b6"} {
			var st ikeStatus
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
				out := w.MustDo(t, "ike-status "+name)
				if err := json.Unmarshal([]byte(out), &st); err != nil {
					t.Fatal(err)
				}
				if len(st.Installed) > 0 && len(st.Peers) == 1 && len(st.Peers[0].SAs) == 1 && st.Peers[0].SAs[0].State == "established" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: no established IKE SA with an installed CHILD SA in 20 s: %+v\nlog:\n%s", name, st.Peers, st.Log)
				}
			}
			t.Logf("%s: %s; %v", name, st.Peers[0].SAs[0], st.Installed)
		}
		// A capture at each end of the link: a packet socket sees the
		// ESP both ways and also the inbound ESP's decrypted packets,
		// which the kernel hands in again on the same interface; what
		// leaves an end in the clear would show with that end's inner
		// source.
		w.MustDo(t, "capture a6 a0")
		w.MustDo(t, "capture b6 b0")
		for _, to := range []string{"[fd00:b::1]:7", "[fd00:d::1]:7"} {
			reply, err := w.Do(ctx, "tcp a6 "+to+" through-ocfw-v6")
			if err != nil || !strings.Contains(reply, "through-ocfw-v6") {
				t.Errorf("echo from a6 to %s through the tunnel: %v %q", to, err, reply)
			}
		}
		for _, end := range []struct{ ns, ifname, ours string }{{"a6", "a0", "[fd00:a::1]|[fd00:c::1]"}, {"b6", "b0", "[fd00:b::1]|[fd00:d::1]"}} {
			capt := w.MustDo(t, "capture-end "+end.ns+" "+end.ifname)
			t.Logf("%s's side of the link:\n%s", end.ns, capt)
			for _, want := range []string{"esp 198.51.100.1 > 198.51.100.2", "esp 198.51.100.2 > 198.51.100.1",
				"esp 2001:db8:6::1 > 2001:db8:6::2", "esp 2001:db8:6::2 > 2001:db8:6::1"} {
				if !strings.Contains(capt, want) {
					t.Errorf("%s: the capture lacks %q", end.ns, want)
				}
			}
			for _, l := range strings.Split(capt, "\n") {
				for _, src := range strings.Split(end.ours, "|") {
					if strings.HasPrefix(l, "tcp "+src) {
						t.Errorf("%s sent its tunnel's traffic in the clear: %s", end.ns, l)
					}
				}
			}
		}
	})
}

// TestOCFWResponderGroups: charon initiates to ocfw with groups 19 and
// 31. Where charon's first group (the one its KE carries) is not ocfw's,
// ocfw answers INVALID_KE_PAYLOAD with its own and charon starts again
// with that group (RFC 7296 1.2, 2.7).
func TestOCFWResponderGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a world VM with strongSwan; skipped with -short")
	}
	root := fetchTest(t)
	west := Instance{Name: "west", NS: "west"}
	base := readTestdata(t, "west.swanctl.conf")
	w := StartWorld(t, "swanresp", root, map[Instance][]byte{west: base})
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := w.Do(ctx, "ike-status ocfw-e"); err == nil {
				t.Logf("ocfw: %s", out)
			}
		}
	})
	for _, c := range []string{
		"ns west", "ns oe", "veth west w0 oe o0",
		"addr west w0 192.0.2.1/24", "addr oe o0 192.0.2.2/24",
		"addr west lo 10.1.0.1/32", "addr oe lo 10.2.0.1/32", "echo-server oe 7",
		"route oe 10.1.0.0/24 192.0.2.1",
	} {
		w.MustDo(t, c)
	}
	if err := west.Start(ctx, w); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"name": "west", "local": "192.0.2.2", "remote": "192.0.2.1",
		"local_id": "east.example", "remote_id": "west.example", "psk": testPSK,
		"local_ts": "10.2.0.0/24", "remote_ts": "10.1.0.0/24", "install": true}
	for i, c := range []struct {
		swan      string // charon west's IKE proposal: its first group goes in its KE
		ocfw, esp string
		invalidKE string // the group charon is told to use instead, "" for none
	}{
		{"aes128-sha256-ecp256", "aes128-sha256-ecp256", "aes128-sha256", ""},
		{"aes256-sha1-curve25519", "aes256-sha1-curve25519", "aes256-sha1", ""},
		{"aes128-sha256-curve25519-ecp256", "aes128-sha256-ecp256", "aes128-sha256", "ECP_256"},
		{"aes128-sha256-modp2048-curve25519", "aes128-sha256-curve25519", "aes128-sha256", "CURVE_25519"},
	} {
		t.Run(c.swan+"-to-"+c.ocfw, func(t *testing.T) {
			if i > 0 {
				w.MustDo(t, "ike-stop ocfw-e")
				w.Do(ctx, west.SwanctlCommand("--terminate", "--ike", "east", "--force"))
				for deadline := time.Now().Add(10 * time.Second); strings.Contains(w.MustDo(t, west.SwanctlCommand("--list-sas")), "ESTABLISHED"); {
					if time.Now().After(deadline) {
						t.Fatal("charon west keeps the IKE SA of the stopped endpoint")
					}
					time.Sleep(300 * time.Millisecond)
				}
			}
			conf := strings.Replace(string(base), "proposals = aes128-sha256-modp2048\n", "proposals = "+c.swan+"\n", 1)
			conf = strings.Replace(conf, "esp_proposals = aes128-sha256\n", "esp_proposals = "+c.esp+"\n", 1)
			if !strings.Contains(conf, c.swan) || !strings.Contains(conf, "esp_proposals = "+c.esp) {
				t.Fatalf("west.swanctl.conf no longer has the proposals this test replaces")
			}
			w.MustDo(t, "write "+west.SwanctlConf()+" "+worldvm.Quote(conf))
			w.MustDo(t, west.SwanctlCommand("--load-all"))
			oc := clone(cfg)
			oc["ike"], oc["esp"] = c.ocfw, c.esp
			w.MustDo(t, "ike oe ocfw-e "+worldvm.Quote(mustJSON(t, oc)))
			out, err := w.Do(ctx, west.SwanctlCommand("--initiate", "--child", "net", "--timeout", "30"))
			if err != nil || !strings.Contains(out, "initiate completed successfully") {
				t.Fatalf("swanctl initiate against ocfw: %v\n%s", err, out)
			}
			told := regexp.MustCompile(`peer didn't accept DH group \S+, it requested (\S+)`).FindStringSubmatch(out)
			switch {
			case c.invalidKE == "" && told != nil:
				t.Errorf("ocfw refused charon's first group: %s", told[0])
			case c.invalidKE != "" && (told == nil || told[1] != c.invalidKE):
				t.Errorf("charon was not told to use %s (INVALID_KE_PAYLOAD); its initiate:\n%s", c.invalidKE, out)
			case told != nil:
				t.Logf("charon: %s", told[0])
			}
			sas := waitSAs(t, w, west, "ocfw-e")
			si, oi := suiteNames(t, c.ocfw, true)
			se, oe := suiteNames(t, c.esp, false)
			checkPair(t, w, "ocfw-e", sas, false, si, "ESP:"+se, oi, oe)
			checkTraffic(t, w, west, "10.2.0.1")
		})
	}
}

// lastLine is the last line of log containing s, and the one before it.
func lastLine(log, s string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i > 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i-1] + "\n" + lines[i]
		}
	}
	return ""
}

// suiteNames is how charon's list-sas and ocfw's status name a suite
// given in strongSwan's notation (an IKE one has a PRF of the integrity
// algorithm's hash).
func suiteNames(t *testing.T, proposal string, ikeSA bool) (swan, ocfw string) {
	t.Helper()
	names := map[string][2]string{
		"aes128": {"AES_CBC-128", "AES-CBC-128"}, "aes192": {"AES_CBC-192", "AES-CBC-192"},
		"aes256": {"AES_CBC-256", "AES-CBC-256"}, "3des": {"3DES_CBC", "3DES"},
		"sha1": {"HMAC_SHA1_96", "HMAC-SHA1-96"}, "sha256": {"HMAC_SHA2_256_128", "HMAC-SHA2-256-128"},
		"prfsha1": {"PRF_HMAC_SHA1", "PRF-HMAC-SHA1"}, "prfsha256": {"PRF_HMAC_SHA2_256", "PRF-HMAC-SHA2-256"},
		"modp2048": {"MODP_2048", "MODP-2048"}, "ecp256": {"ECP_256", "ECP-256"}, "curve25519": {"CURVE_25519", "Curve25519"},
	}
	var sw, oc []string
	for _, p := range strings.Split(proposal, "-") {
		words := []string{p}
		if ikeSA && strings.HasPrefix(p, "sha") {
			words = append(words, "prf"+p)
		}
		for _, w := range words {
			n, ok := names[w]
			if !ok {
				t.Fatalf("suiteNames: no names for %q", w)
			}
			sw, oc = append(sw, n[0]), append(oc, n[1])
		}
	}
	return strings.Join(sw, "/"), strings.Join(oc, "/")
}

// checkTraffic sends a line from charon's namespace to ocfw's inner
// address and back, which only the tunnel routes, and checks that
// charon's CHILD SA counted it both ways: ocfw's kernel decrypted what
// charon's sent and answered through its own SA.
func checkTraffic(t *testing.T, w *worldvm.World, in Instance, to string) {
	t.Helper()
	reply, err := w.Do(context.Background(), fmt.Sprintf("tcp %s %s:7 through-ocfw", in.NS, to))
	if err != nil || !strings.Contains(reply, "through-ocfw") {
		t.Fatalf("echo from charon %s through the tunnel to ocfw's %s: %v %q", in.Name, to, err, reply)
	}
	sas := w.MustDo(t, in.SwanctlCommand("--list-sas"))
	bin, bout := saBytes(t, sas)
	if bin == 0 || bout == 0 {
		t.Errorf("charon %s's CHILD SA counted %d bytes in and %d out, want both > 0:\n%s", in.Name, bin, bout, sas)
	}
	t.Logf("through the tunnel: %q; charon %s counted %d bytes in, %d out", reply, in.Name, bin, bout)
}

func clone(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitSAs waits (20 s at most) until charon in has an installed CHILD
// SA, and returns its list-sas.
func waitSAs(t *testing.T, w *worldvm.World, in Instance, ocfw string) string {
	t.Helper()
	var sas string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		sas = w.MustDo(t, in.SwanctlCommand("--list-sas"))
		if strings.Contains(sas, "ESTABLISHED") && strings.Contains(sas, "INSTALLED") {
			return sas
		}
	}
	st := w.MustDo(t, "ike-status "+ocfw)
	t.Fatalf("no established IKE SA with an installed CHILD SA in charon %s within 20 s:\n%s\nocfw: %s", in.Name, sas, st)
	return ""
}

var spiRe = regexp.MustCompile(`(?m)^\s+(in|out)\s+([0-9a-f]{8}),`)

// checkPair checks both ends: charon's list-sas shows the suites, ocfw's
// status the same ones, and the CHILD SA's SPIs cross over (ocfw's
// inbound is charon's outbound and back).
func checkPair(t *testing.T, w *worldvm.World, ocfw, sas string, ocfwInitiated bool, swanIKE, swanESP, ocfwIKE, ocfwESP string) {
	t.Helper()
	for _, want := range []string{"ESTABLISHED", "IKEv2", swanIKE, "INSTALLED, TUNNEL", swanESP} {
		if !strings.Contains(sas, want) {
			t.Errorf("charon's list-sas lacks %q", want)
		}
	}
	var st ikeStatus
	out := w.MustDo(t, "ike-status "+ocfw)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("ike-status: %v: %s", err, out)
	}
	if len(st.Peers) != 1 || len(st.Peers[0].SAs) != 1 {
		t.Fatalf("ocfw status: want one peer with one IKE SA: %+v\nlog:\n%s", st.Peers, st.Log)
	}
	sa := st.Peers[0].SAs[0]
	t.Logf("ocfw: %s (initiator %v, udp-encap %v); CHILD SAs %v", sa, sa.Initiator, sa.UDPEncap, st.Installed)
	if sa.State != "established" || sa.Initiator != ocfwInitiated || sa.Proposal != ocfwIKE {
		t.Errorf("ocfw's IKE SA: state %q initiator %v suite %q, want established, %v, %q", sa.State, sa.Initiator, sa.Proposal, ocfwInitiated, ocfwIKE)
	}
	if len(sa.Children) != 1 || len(st.Installed) != 1 {
		t.Fatalf("ocfw: %d CHILD SAs in the status, %d installed, want 1 and 1", len(sa.Children), len(st.Installed))
	}
	ch := sa.Children[0]
	if ch.Proposal != ocfwESP {
		t.Errorf("ocfw's CHILD SA suite %q, want %q", ch.Proposal, ocfwESP)
	}
	spis := map[string]uint32{}
	for _, m := range spiRe.FindAllStringSubmatch(sas, -1) {
		v, _ := strconv.ParseUint(m[2], 16, 32)
		spis[m[1]] = uint32(v)
	}
	if spis["in"] != ch.OutSPI || spis["out"] != ch.InSPI {
		t.Errorf("SPIs do not pair: charon in %08x out %08x, ocfw in %08x out %08x", spis["in"], spis["out"], ch.InSPI, ch.OutSPI)
	}
	// charon's list-sas names the IKE SA's SPIs initiator's first.
	spiPair := fmt.Sprintf("%016x_i", sa.SPIi)
	if !strings.Contains(sas, spiPair) {
		t.Errorf("charon's list-sas lacks the IKE SA's initiator SPI %s", spiPair)
	}
}
