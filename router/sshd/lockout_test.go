package sshd

// The table of connections not logged in, against clients that hold
// their places: the admin must get in from any address, its own
// included, and a flood must leave only the table's bound alive.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// kexInit is the fields of SSH_MSG_KEXINIT (RFC 4253 7.1), for a client
// that starts a key exchange and then stalls.
type kexInit struct {
	Cookie          [16]byte `sshtype:"20"`
	KexAlgos        []string
	HostKeyAlgos    []string
	CiphersOut      []string
	CiphersIn       []string
	MACsOut         []string
	MACsIn          []string
	CompressionOut  []string
	CompressionIn   []string
	LanguagesOut    []string
	LanguagesIn     []string
	FirstKexFollows bool
	Reserved        uint32
}

// stalledHello is what a client stalled inside the key exchange sends:
// its identification line and one KEXINIT packet (unencrypted, as the
// first exchange is), then nothing.
func stalledHello(t *testing.T) []byte {
	t.Helper()
	m := kexInit{
		KexAlgos: []string{ssh.KeyExchangeCurve25519}, HostKeyAlgos: []string{ssh.KeyAlgoED25519},
		CiphersOut: []string{ssh.CipherChaCha20Poly1305}, CiphersIn: []string{ssh.CipherChaCha20Poly1305},
		MACsOut: []string{ssh.HMACSHA256ETM}, MACsIn: []string{ssh.HMACSHA256ETM},
		CompressionOut: []string{"none"}, CompressionIn: []string{"none"},
	}
	rand.Read(m.Cookie[:])
	payload := ssh.Marshal(&m)
	// Padding: at least 4 bytes, and length field + padding length +
	// payload + padding a multiple of 8.
	pad := 8 - (4+1+len(payload))%8
	if pad < 4 {
		pad += 8
	}
	pkt := binary.BigEndian.AppendUint32(nil, uint32(1+len(payload)+pad))
	pkt = append(pkt, byte(pad))
	pkt = append(pkt, payload...)
	pkt = append(pkt, make([]byte, pad)...)
	return append([]byte("SSH-2.0-stalled\r\n"), pkt...)
}

// holdFrom opens a connection to ts from src that sends hello (nil:
// nothing) and is closed at the test's end.
func holdFrom(t *testing.T, ts *testServer, src string, hello []byte) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second} // hang guard
	c, err := d.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatalf("connect from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	if hello != nil {
		c.Write(hello) // an evicted one may already be closed: no matter
	}
	return c
}

// tableOnce waits until the gate holds want connections not logged in,
// every one of which has sent its identification line; after a hang
// guard it reports what the table holds and goes on.
func tableOnce(t *testing.T, ts *testServer, want int) {
	t.Helper()
	// A hang guard, generous: at load 14 one of 64 connections was not
	// yet admitted and read after 10 s.
	deadline := time.Now().Add(45 * time.Second)
	for {
		ts.srv.gate.mu.Lock()
		n, talking := len(ts.srv.gate.starting), 0
		for st := range ts.srv.gate.starting {
			if st.ident {
				talking++
			}
		}
		ts.srv.gate.mu.Unlock()
		if n == want && talking == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the table holds %d connections, %d of them talking; want %d talking", n, talking, want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdminNotLockedOut: 8 silent connections and 8 stalled inside the
// key exchange, from the admin's own address or filling the whole table
// from others, never keep the admin's OpenSSH out, time after time. The
// graces are a minute, so it is the table making room that lets the
// admin in, not a held connection timing out.
func TestAdminNotLockedOut(t *testing.T) {
	tool(t, "ssh")
	path, signer := keyFile(t, ed25519Key(t))
	ts := startWithKeys(t, func(c *Config) {
		c.IdentGrace, c.LoginGrace = time.Minute, time.Minute
	}, signer)
	ts.srv.gate.mu.Lock()
	ts.srv.gate.every = 100 * time.Millisecond // summaries, for the log check
	ts.srv.gate.mu.Unlock()
	o := newOpenSSH(t, ts, path)
	hello := stalledHello(t)
	type hold struct {
		src             string
		silent, stalled int
	}
	for _, tc := range []struct {
		name  string
		holds []hold // the admin's address is 127.0.0.1
		table int    // stalled connections the table keeps
	}{
		{"from the admin's own address", []hold{{"127.0.0.1", 8, 8}}, DefaultPerSourceStartups},
		{"filling the table from other addresses", []hold{
			{"127.0.0.2", 8, 0}, {"127.0.0.3", 8, 0}, {"127.0.0.4", 8, 0}, {"127.0.0.5", 8, 0},
			{"127.0.0.6", 0, 8}, {"127.0.0.7", 0, 8}, {"127.0.0.8", 0, 8}, {"127.0.0.9", 0, 8},
		}, DefaultMaxStartups},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for try := 1; try <= 3; try++ {
				for _, h := range tc.holds {
					for range h.silent {
						holdFrom(t, ts, h.src, nil)
					}
					for range h.stalled {
						holdFrom(t, ts, h.src, hello)
					}
				}
				tableOnce(t, ts, tc.table)
				begin := time.Now()
				out, errOut, code := o.ssh(t, "echo in")
				took := time.Since(begin)
				if code != 0 || out != "in\n" {
					t.Fatalf("try %d: admin's ssh with %d stalled connections held: exit %d, stdout %q, stderr %q\nlog:\n%s", try, tc.table, code, out, errOut, ts.log)
				}
				// The bound for the admin: in within 10 s
				// whatever is held (a local login takes well under
				// a second even on a loaded machine).
				if took > 10*time.Second {
					t.Errorf("try %d: the admin's login took %v, want under 10 s", try, took.Round(time.Millisecond))
				}
				t.Logf("try %d: logged in in %v", try, took.Round(time.Millisecond))
			}
		})
	}
	log := ts.log.waitFor("connections that did not log in")
	for _, want := range []string{"silent closed for a newer one from the same source", "stalled closed for a newer one from the same source", "silent closed to make room", "stalled closed to make room"} {
		if !strings.Contains(log, want) {
			t.Errorf("the summary lacks %q:\n%s", want, log)
		}
	}
}

// TestStartupFlood: 500 connections from 50 addresses, silent and
// stalled, leave at most the table's bound alive on the server: the
// evicted ones' goroutines end and the clients see their connections
// closed.
func TestStartupFlood(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.IdentGrace, c.LoginGrace = time.Minute, time.Minute
	})
	base := runtime.NumGoroutine()
	hello := stalledHello(t)
	var conns []net.Conn
	for i := range 500 {
		var h []byte
		if i%2 == 1 {
			h = hello
		}
		conns = append(conns, holdFrom(t, ts, fmt.Sprintf("127.0.0.%d", 2+i%50), h))
	}
	ts.srv.gate.mu.Lock()
	n := len(ts.srv.gate.starting)
	ts.srv.gate.mu.Unlock()
	if n > DefaultMaxStartups {
		t.Errorf("the table holds %d, want at most %d", n, DefaultMaxStartups)
	}
	// Each held connection costs its handler and x/crypto/ssh's
	// reader and key exchange loops: a few goroutines. The evicted
	// ones' end when their close is noticed.
	bound := base + 4*DefaultMaxStartups
	deadline := time.Now().Add(20 * time.Second) // hang guard
	for runtime.NumGoroutine() > bound && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > bound {
		t.Errorf("%d goroutines after the flood, want at most %d (%d before it)", g, bound, base)
	}
	// From the clients' side: all but at most the bound were closed by
	// the server (EOF or reset after its banner), the rest still wait.
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			open++
		}
	}
	if open > DefaultMaxStartups {
		t.Errorf("%d of 500 connections still open, want at most %d", open, DefaultMaxStartups)
	}
}

// TestLoginGraceEndsStalledKex: a client that sent its identification
// line and a KEXINIT and then nothing is closed when the login grace
// ends (OpenSSH's LoginGraceTime).
func TestLoginGraceEndsStalledKex(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.IdentGrace, c.LoginGrace = time.Minute, 300*time.Millisecond
	})
	c := holdFrom(t, ts, "127.0.0.1", stalledHello(t))
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) // hang guard
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection stalled in its key exchange was still open 20 s after a 300 ms login grace")
	}
}
