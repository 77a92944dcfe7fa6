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
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// server is an SSH server in the test offering an RSA and an ed25519
// host key, as the box does; "cat" copies stdin to stdout, "fail"
// writes to stderr and exits 3.
type server struct {
	addr     string
	ed, rsa  ssh.PublicKey
	identity string // the client's private key file
}

func newServer(t *testing.T) *server {
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
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
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
