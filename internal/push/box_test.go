package push

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ocfw/ocfw/internal/sshclient"
)

// fakeBox is an SSH server in this process that answers push's commands
// as the box's `ocf config` does, with scripted generations: applied is
// the number apply answers with, waiting the one that waits for its
// confirm afterwards (another when a power cut rolled the push back and
// someone else pushed since).
type fakeBox struct {
	addr             string
	ed25519, rsa     ssh.PublicKey
	applied, waiting int
	mu               sync.Mutex
	cmds             []string
}

func newFakeBox(t *testing.T, applied, waiting int) (*fakeBox, string) {
	t.Helper()
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edSigner, err := ssh.NewSignerFromKey(edPriv)
	if err != nil {
		t.Fatal(err)
	}
	rsaSigner, err := ssh.NewSignerFromKey(rsaPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientSigner, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if !bytes.Equal(k.Marshal(), clientSigner.PublicKey().Marshal()) {
			return nil, fmt.Errorf("unknown key")
		}
		return nil, nil
	}}
	// RSA first, as the box's sshd offers them: the client decides.
	cfg.AddHostKey(rsaSigner)
	cfg.AddHostKey(edSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b := &fakeBox{addr: l.Addr().String(), ed25519: edSigner.PublicKey(), rsa: rsaSigner.PublicKey(), applied: applied, waiting: waiting}
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go b.serve(nc, cfg)
		}
	}()
	return b, keyFile
}

func (b *fakeBox) serve(nc net.Conn, cfg *ssh.ServerConfig) {
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
				cmd := string(req.Payload[4:])
				code := b.run(cmd, ch, ch.Stderr())
				status := make([]byte, 4)
				binary.BigEndian.PutUint32(status, uint32(code))
				ch.SendRequest("exit-status", false, status)
				return
			}
		}()
	}
}

// run answers one command as the box does.
func (b *fakeBox) run(cmd string, ch io.ReadWriter, stderr io.Writer) int {
	b.mu.Lock()
	b.cmds = append(b.cmds, cmd)
	b.mu.Unlock()
	switch {
	case cmd == "ocf config stage":
		io.Copy(io.Discard, ch)
		fmt.Fprintln(ch, "staged [site.json] in /staging")
	case strings.HasPrefix(cmd, "ocf config apply"):
		fmt.Fprintf(ch, "pushed config %d applies now (firewall); it is rolled back at 2026-12-04T22:00:00Z unless confirmed over a new SSH connection (ocf config confirm %d)\n", b.applied, b.applied)
	case cmd == "ocf config confirm":
		// The box before generations: it kept whichever waited.
		fmt.Fprintf(ch, "pushed config %d confirmed at 2026-12-04T21:59:00Z; the box boots it from now on\n", b.waiting)
	case strings.HasPrefix(cmd, "ocf config confirm "):
		var n int
		fmt.Sscanf(cmd, "ocf config confirm %d", &n)
		if n != b.waiting {
			fmt.Fprintf(stderr, "ocf: pushed config %d is not the one waiting for a confirm, pushed config %d is: nothing confirmed\n", n, b.waiting)
			return 1
		}
		fmt.Fprintf(ch, "pushed config %d confirmed at 2026-12-04T21:59:00Z; the box boots it from now on\n", n)
	default:
		fmt.Fprintf(stderr, "unknown command %q\n", cmd)
		return 127
	}
	return 0
}

func (b *fakeBox) commands() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.cmds...)
}

// A push confirms its own generation only: when a power cut rolled push
// A (4) back and config B (5) was applied since, A's confirm is refused
// and push exits non-zero saying so; its own generation is confirmed.
func TestConfirmGeneration(t *testing.T) {
	for _, tc := range []struct {
		name             string
		applied, waiting int
		wantErr, wantOut string
	}{
		{"another config waits", 4, 5, "confirming pushed config 4 on 127.0.0.1:", ""},
		{"its own config waits", 4, 4, "", "pushed config 4 confirmed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box, key := newFakeBox(t, tc.applied, tc.waiting)
			var out bytes.Buffer
			err := Push(context.Background(), Options{Options: sshclient.Options{Host: box.addr, Identities: []string{key}, HostKey: ssh.FingerprintSHA256(box.ed25519)},
				Within: 2 * time.Minute, Out: &out}, Bundle{Site: []byte(`{}`)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "pushed config 5 is") {
					t.Errorf("push A while B waits: err %v, want it refused naming both\n%s", err, out.String())
				}
			} else if err != nil || !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("push: err %v\n%s", err, out.String())
			}
			if cmds := box.commands(); len(cmds) != 3 || cmds[2] != fmt.Sprintf("ocf config confirm %d", tc.applied) {
				t.Errorf("commands %q, want stage, apply, confirm %d", cmds, tc.applied)
			}
		})
	}
}

// --no-confirm prints a command OpenSSH takes: the port as -p.
func TestNoConfirmHint(t *testing.T) {
	box, key := newFakeBox(t, 3, 3)
	var out bytes.Buffer
	err := Push(context.Background(), Options{Options: sshclient.Options{Host: box.addr, Identities: []string{key}, HostKey: ssh.FingerprintSHA256(box.ed25519)},
		NoConfirm: true, Out: &out}, Bundle{Site: []byte(`{}`)})
	_, port, _ := net.SplitHostPort(box.addr)
	if want := "`ssh -p " + port + " root@127.0.0.1 ocf config confirm 3`"; err != nil || !strings.Contains(out.String(), want) {
		t.Errorf("err %v; output lacks %s:\n%s", err, want, out.String())
	}
	for _, tc := range []struct{ addr, user, want string }{
		{"192.168.1.1:22", "root", "ssh root@192.168.1.1 ocf config confirm 2"},
		{"127.0.0.1:2301", "admin", "ssh -p 2301 admin@127.0.0.1 ocf config confirm 2"},
	} {
		if got := confirmCommand(tc.addr, tc.user, 2); got != tc.want {
			t.Errorf("confirmCommand(%q, %q) = %q, want %q", tc.addr, tc.user, got, tc.want)
		}
	}
}

// On first contact push shows the box's ed25519 fingerprint, the one
// `ocf net` shows, though the box offers RSA too; --accept-new stores
// that key; errors name the box's host and port.
func TestHostKeyFirstContact(t *testing.T) {
	box, key := newFakeBox(t, 3, 3)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	o := Options{Options: sshclient.Options{Host: box.addr, Identities: []string{key}, KnownHosts: kh}, NoConfirm: true, Out: io.Discard}
	err := Push(context.Background(), o, Bundle{Site: []byte(`{}`)})
	var unknown *sshclient.UnknownHostError
	if !errors.As(err, &unknown) || unknown.Fingerprint != ssh.FingerprintSHA256(box.ed25519) || !strings.Contains(err.Error(), box.addr) {
		t.Fatalf("first contact: %v; want the ed25519 fingerprint %s and %s", err, ssh.FingerprintSHA256(box.ed25519), box.addr)
	}
	o.AcceptNew = true
	if err := Push(context.Background(), o, Bundle{Site: []byte(`{}`)}); err != nil {
		t.Fatalf("--accept-new: %v", err)
	}
	b, _ := os.ReadFile(kh)
	host, port, _ := net.SplitHostPort(box.addr)
	if want := "[" + host + "]:" + port + " " + string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(box.ed25519))); strings.TrimSpace(string(b)) != want {
		t.Errorf("known_hosts after --accept-new:\n%s\nwant\n%s", b, want)
	}
	// A pin of the RSA key's fingerprint is not what push compares.
	o.AcceptNew, o.KnownHosts, o.HostKey = false, "", ssh.FingerprintSHA256(box.rsa)
	if err := Push(context.Background(), o, Bundle{Site: []byte(`{}`)}); err == nil || !strings.Contains(err.Error(), box.addr) {
		t.Errorf("a pin of another key: %v, want a refusal naming %s", err, box.addr)
	}
}
