package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// defaultPassword is what `ssh ... password CMD` tries.
const defaultPassword = "password"

func sshAuth(spec string) (ssh.AuthMethod, string, error) {
	if spec == "password" || strings.HasPrefix(spec, "password=") {
		pw := defaultPassword
		if _, p, ok := strings.Cut(spec, "="); ok {
			pw = p
		}
		return ssh.Password(pw), "password", nil
	}
	pem, err := os.ReadFile(spec)
	if err != nil {
		return nil, "", kinded("usage", fmt.Errorf("key file: %w", err))
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, "", kinded("usage", fmt.Errorf("key file %s: %w", spec, err))
	}
	return ssh.PublicKeys(signer), "publickey", nil
}

func cmdSSH(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	hostport, user, cmd := args[1], args[2], args[4]
	auth, _, err := sshAuth(args[3])
	if err != nil {
		return "", err
	}
	conn, err := n.dial(ctx, "tcp4", hostport)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl) // bounds the handshake and the command alike
	var hostKey string
	cfg := &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{auth},
		// The router's ed25519 key, the one its log and ocf net show
		// (x/crypto/ssh would prefer its RSA key).
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			hostKey = ssh.FingerprintSHA256(k)
			return nil
		},
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, hostport, cfg)
	if err != nil {
		if strings.Contains(err.Error(), "unable to authenticate") {
			return "", kinded("auth", err)
		}
		return "", kinded(netKind(err, "ssh"), err)
	}
	client := ssh.NewClient(c, chans, reqs)
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return "", kinded("ssh", err)
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(cmd)
	code := 0
	var exit *ssh.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitStatus()
	case err != nil:
		return "", kinded(netKind(err, "ssh"), fmt.Errorf("running %q: %w", cmd, err))
	}
	return fmt.Sprintf("exit %d hostkey %s\n%s", code, hostKey, out), nil
}

// cmdSSHServer runs a small SSH server that accepts the public keys in
// an authorized_keys file and runs a few built-in commands: enough to
// test the ssh command without the router.
func cmdSSHServer(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	authorized, err := readAuthorizedKeys(args[2])
	if err != nil {
		return "", kinded("usage", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return "", err
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(md ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if authorized[string(k.Marshal())] {
				return nil, nil
			}
			return nil, fmt.Errorf("key %s not authorized", ssh.FingerprintSHA256(k))
		},
	}
	cfg.AddHostKey(signer)
	if err := n.serveTCP("ssh-server", args[1], func(c net.Conn) { serveSSH(n, c, cfg) }); err != nil {
		return "", err
	}
	return fmt.Sprintf("ssh-server on tcp %s hostkey %s", args[1], ssh.FingerprintSHA256(signer.PublicKey())), nil
}

func readAuthorizedKeys(file string) (map[string]bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for len(bytes.TrimSpace(b)) > 0 {
		k, _, _, rest, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		keys[string(k.Marshal())] = true
		b = rest
	}
	return keys, nil
}

func serveSSH(n *netNS, c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		n.event("ssh from %s: %v", c.RemoteAddr(), err)
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
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
				cmd := string(req.Payload[4:])
				req.Reply(true, nil)
				out, code := builtin(sc.User(), cmd)
				n.event("ssh %s@%s ran %q exit %d", sc.User(), sc.RemoteAddr(), cmd, code)
				ch.Write([]byte(out))
				status := make([]byte, 4)
				binary.BigEndian.PutUint32(status, uint32(code))
				ch.SendRequest("exit-status", false, status)
				return
			}
		}()
	}
}

// builtin runs the ssh-server's commands: echo ARGS, exit N, whoami.
func builtin(user, cmd string) (string, int) {
	f := strings.Fields(cmd)
	switch {
	case len(f) == 0:
		return "", 0
	case f[0] == "echo":
		return strings.Join(f[1:], " ") + "\n", 0
	case f[0] == "whoami":
		return user + "\n", 0
	case f[0] == "exit" && len(f) == 2:
		code, err := strconv.Atoi(f[1])
		if err == nil {
			return "", code
		}
	}
	return "unknown command: " + cmd + "\n", 127
}
