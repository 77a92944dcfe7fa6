package sshclient

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/router/sshd"
)

// server is an SSH server in the test offering an RSA and an ed25519
// host key, as the box does; "cat" copies stdin to stdout, "fail"
// writes to stderr and exits 3.
type server struct {
	addr     string
	ed, rsa  ssh.PublicKey
	identity string // the client's private key file
}

func newServer(t *testing.T) *server { return newServerWith(t, nil) }

// newServerWith is newServer offering only ciphers (nil: the defaults).
func newServerWith(t testing.TB, ciphers []string) *server {
	t.Helper()
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edS, _ := ssh.NewSignerFromKey(edPriv)
	rsaS, _ := ssh.NewSignerFromKey(rsaPriv)
	_, cPriv, _ := ed25519.GenerateKey(rand.Reader)
	cS, _ := ssh.NewSignerFromKey(cPriv)
	block, err := ssh.MarshalPrivateKey(cPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	id := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(id, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{Config: ssh.Config{Ciphers: ciphers}, PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if !bytes.Equal(k.Marshal(), cS.PublicKey().Marshal()) {
			return nil, errors.New("unknown key")
		}
		return nil, nil
	}}
	cfg.AddHostKey(rsaS)
	cfg.AddHostKey(edS)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go serve(nc, cfg)
		}
	}()
	return &server{addr: l.Addr().String(), ed: edS.PublicKey(), rsa: rsaS.PublicKey(), identity: id}
}

func serve(nc net.Conn, cfg *ssh.ServerConfig) {
	defer nc.Close()
	_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		ch, creqs, err := nch.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range creqs {
				if req.Type != "exec" || len(req.Payload) < 4 {
					req.Reply(false, nil)
					continue
				}
				req.Reply(true, nil)
				code := uint32(0)
				switch string(req.Payload[4:]) {
				case "cat":
					io.Copy(ch, ch)
				default:
					io.WriteString(ch.Stderr(), "ocf: no such thing\n")
					code = 3
				}
				st := make([]byte, 4)
				binary.BigEndian.PutUint32(st, code)
				ch.SendRequest("exit-status", false, st)
				return
			}
		}()
	}
}

// Run, the upgrade's Remote, streams stdin to the command and its output
// back; a failure carries the box's words and names user, host and
// port; the first contact is checked as push's is (ed25519, accept-new).
func TestRun(t *testing.T) {
	s := newServer(t)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	c, err := New(Options{Host: s.addr, Identities: []string{s.identity}, KnownHosts: kh})
	if err != nil {
		t.Fatal(err)
	}
	var unknown *UnknownHostError
	err = c.Run(context.Background(), "cat", strings.NewReader("x"), io.Discard)
	if !errors.As(err, &unknown) || unknown.Fingerprint != ssh.FingerprintSHA256(s.ed) || !strings.Contains(err.Error(), "root@"+s.addr) {
		t.Fatalf("first contact: %v; want the ed25519 fingerprint and root@%s", err, s.addr)
	}
	host, port, _ := net.SplitHostPort(s.addr)
	c, err = New(Options{Host: "admin@" + host, Port: mustAtoi(t, port), Identities: []string{s.identity}, KnownHosts: kh, AcceptNew: true})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("system "), 200000)
	var out bytes.Buffer
	if err := c.Run(context.Background(), "cat", bytes.NewReader(big), &out); err != nil || !bytes.Equal(out.Bytes(), big) {
		t.Fatalf("cat of %d bytes: %v, %d back", len(big), err, out.Len())
	}
	if b, _ := os.ReadFile(kh); !strings.Contains(string(b), "ssh-ed25519 ") || strings.Contains(string(b), "ssh-rsa") {
		t.Errorf("known_hosts after --accept-new: %s", b)
	}
	err = c.Run(context.Background(), "fail", nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ssh admin@"+s.addr+" fail: ocf: no such thing") {
		t.Errorf("a failing command: %v", err)
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCiphers: the client asks for ChaCha20-Poly1305 first, every cipher
// it asks for is one the router's server offers, and it still talks to
// a server without ChaCha20-Poly1305.
func TestCiphers(t *testing.T) {
	if Ciphers[0] != ssh.CipherChaCha20Poly1305 {
		t.Errorf("first cipher %s, want %s", Ciphers[0], ssh.CipherChaCha20Poly1305)
	}
	for _, c := range Ciphers {
		if !slices.Contains(sshd.Ciphers, c) {
			t.Errorf("%s is not offered by the router (router/sshd.Ciphers %v)", c, sshd.Ciphers)
		}
	}
	s := newServerWith(t, []string{ssh.CipherAES128GCM})
	kh := filepath.Join(t.TempDir(), "known_hosts")
	c, err := New(Options{Host: s.addr, Identities: []string{s.identity}, KnownHosts: kh, AcceptNew: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Run(context.Background(), "cat", strings.NewReader("over aes128-gcm"), &out); err != nil || out.String() != "over aes128-gcm" {
		t.Errorf("with an AES-GCM-only server: %q, %v", out.String(), err)
	}
}

// BenchmarkSSHCiphers copies 16 MiB through "cat" over SSH with each
// cipher alone on both ends, the client's and server's work in this one
// process. Run it for the box's CPU: GOARCH=386 GO386=softfloat go test
// -run '^$' -bench SSHCiphers ./internal/sshclient (README, Benchmarks).
func BenchmarkSSHCiphers(b *testing.B) {
	data := bytes.Repeat([]byte("ocfw"), 4<<20)
	for _, cipher := range []string{ssh.CipherChaCha20Poly1305, ssh.CipherAES128GCM, ssh.CipherAES128CTR} {
		b.Run(cipher, func(b *testing.B) {
			s := newServerWith(b, []string{cipher})
			kh := filepath.Join(b.TempDir(), "known_hosts")
			c, err := New(Options{Host: s.addr, Identities: []string{s.identity}, KnownHosts: kh, AcceptNew: true})
			if err != nil {
				b.Fatal(err)
			}
			c.config.Ciphers = []string{cipher}
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if err := c.Run(context.Background(), "cat", bytes.NewReader(data), io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
