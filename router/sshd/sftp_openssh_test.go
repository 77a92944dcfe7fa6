package sshd

// The sftp subsystem driven by OpenSSH's own scp (sftp mode, its
// default since OpenSSH 9) and sftp, on 127.0.0.1.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testView is a card view as the router shows it, with a key file the
// view leaves out.
var testView = map[string]string{
	"report.json":         `{"boot": 7, "verdict": "ok"}` + "\n",
	"reports/boot-6.json": `{"boot": 6}` + "\n",
	"reports/boot-7.json": `{"boot": 7, "verdict": "ok"}` + "\n",
	"log.txt":             "2026-12-04T09:00:00Z boot 7\n2026-12-04T09:00:01Z ssh: host key SHA256:x\n",
	"site.json":           `{"kind": "site", "hostname": "gw"}` + "\n",
}

func viewOf(m map[string]string) func() []ViewFile {
	return func() []ViewFile {
		var v []ViewFile
		for p, c := range m {
			v = append(v, ViewFile{Path: p, Read: func() ([]byte, error) { return []byte(c), nil }})
		}
		return v
	}
}

func TestOpenSSHFiles(t *testing.T) {
	tool(t, "scp")
	tool(t, "sftp")
	path, signer := keyFile(t, ed25519Key(t))
	staging := filepath.Join(t.TempDir(), "staging") // made by the first upload
	ts := startWithKeys(t, func(c *Config) {
		c.View = viewOf(testView)
		c.StagingDir = staging
		c.StagingFileMax = 64 << 10
		c.StagingMax = 100 << 10
		c.StagingFiles = 4
	}, signer)
	o := newOpenSSH(t, ts, path)
	local := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(local, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, size), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	same := func(t *testing.T, got, want string) {
		t.Helper()
		b, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s holds %q, want %q", got, b, want)
		}
	}
	staged := func() []string {
		es, _ := os.ReadDir(staging)
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return n
	}
	const host = "root@127.0.0.1:"

	t.Run("scp download", func(t *testing.T) {
		for _, name := range []string{"report.json", "site.json"} {
			dst := filepath.Join(local, "got-"+name)
			if _, errOut, code := o.run(t, "scp", "", host+"/"+name, dst); code != 0 {
				t.Fatalf("scp %s: exit %d: %s\nlog:\n%s", name, code, errOut, ts.log)
			}
			same(t, dst, testView[name])
		}
	})
	t.Run("scp upload into staging", func(t *testing.T) {
		src := filepath.Join(local, "site.json")
		os.WriteFile(src, []byte(`{"kind": "site"}`), 0o600)
		if _, errOut, code := o.run(t, "scp", "", src, host+"/staging/site.json"); code != 0 {
			t.Fatalf("scp upload: exit %d: %s\nlog:\n%s", code, errOut, ts.log)
		}
		same(t, filepath.Join(staging, "site.json"), `{"kind": "site"}`)
	})
	t.Run("sftp batch", func(t *testing.T) {
		key := filepath.Join(local, "key")
		os.WriteFile(key, []byte("0123456789abcdef"), 0o600)
		got := filepath.Join(local, "log.txt")
		batch := "ls -1 /\nls -1 /reports\nget /log.txt " + got + "\nput " + key + " /staging/tunnel.key\nls -l /staging\n"
		out, errOut, code := o.run(t, "sftp", batch, "-b", "-", "root@127.0.0.1")
		if code != 0 {
			t.Fatalf("sftp -b: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, out, errOut, ts.log)
		}
		for _, want := range []string{"log.txt", "report.json", "reports", "site.json", "staging", "boot-6.json", "boot-7.json", "tunnel.key"} {
			if !strings.Contains(out, want) {
				t.Errorf("listing lacks %s:\n%s", want, out)
			}
		}
		same(t, got, testView["log.txt"])
		same(t, filepath.Join(staging, "tunnel.key"), "0123456789abcdef")
	})
	t.Run("scp -p, chmod, rename, rm in staging", func(t *testing.T) {
		p := write("p.txt", 5)
		if _, errOut, code := o.run(t, "scp", "", "-p", p, host+"/staging/p.txt"); code != 0 {
			t.Fatalf("scp -p: exit %d: %s\nlog:\n%s", code, errOut, ts.log)
		}
		batch := "chmod 600 /staging/p.txt\nrename /staging/p.txt /staging/q.txt\nls /staging\nrm /staging/q.txt\n"
		out, errOut, code := o.run(t, "sftp", batch, "-b", "-", "root@127.0.0.1")
		if code != 0 || !strings.Contains(out, "q.txt") {
			t.Fatalf("sftp -b: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		if got := strings.Join(staged(), " "); got != "site.json tunnel.key" {
			t.Errorf("staging holds %s after rm", got)
		}
	})
	t.Run("over the caps refused", func(t *testing.T) {
		big := write("big.bin", 80<<10)
		_, errOut, code := o.run(t, "scp", "", big, host+"/staging/big.bin")
		if code == 0 || strings.Count(errOut, "ocfw: /staging/big.bin: over the 64 KiB per-file limit") != 1 {
			t.Errorf("80 KiB upload: exit %d, stderr %q; want a failure naming the per-file limit", code, errOut)
		}
		a, b := write("a.bin", 50<<10), write("b.bin", 50<<10)
		if _, errOut, code := o.run(t, "scp", "", a, host+"/staging/a.bin"); code != 0 {
			t.Fatalf("50 KiB upload: exit %d: %s", code, errOut)
		}
		_, errOut, code = o.run(t, "scp", "", b, host+"/staging/b.bin")
		if code == 0 || !strings.Contains(errOut, "over its 100 KiB limit") {
			t.Errorf("second 50 KiB upload: exit %d, stderr %q; want a failure naming the total limit", code, errOut)
		}
		c := write("c.bin", 10)
		_, errOut, code = o.run(t, "scp", "", c, host+"/staging/c.bin")
		if code != 0 {
			t.Errorf("fourth file: exit %d, stderr %q", code, errOut)
		}
		_, errOut, code = o.run(t, "scp", "", c, host+"/staging/d.bin")
		if code == 0 || !strings.Contains(errOut, "already holds 4 files") {
			t.Errorf("fifth file: exit %d, stderr %q; want a failure naming the file limit", code, errOut)
		}
		// Refused uploads leave nothing behind.
		if got, want := strings.Join(staged(), " "), "a.bin c.bin site.json tunnel.key"; got != want {
			t.Errorf("staging holds %s, want %s", got, want)
		}
	})
	t.Run("outside staging refused", func(t *testing.T) {
		src := write("x", 10)
		for _, dst := range []string{"/site.json", "/x", "/reports/x", "/staging/sub/x", "/staging/.hidden", filepath.Join(local, "escaped")} {
			_, errOut, code := o.run(t, "scp", "", src, host+dst)
			if code == 0 || !strings.Contains(errOut, "Permission denied") {
				t.Errorf("scp to %s: exit %d, stderr %q; want permission denied", dst, code, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(local, "escaped")); err == nil {
			t.Errorf("an upload reached the host's file system")
		}
		// The router's own files are not there to read.
		got := filepath.Join(local, "passwd")
		_, errOut, code := o.run(t, "scp", "", host+"/etc/passwd", got)
		if code == 0 || !strings.Contains(errOut, "/etc/passwd: only the card's view and /staging/ are reachable") {
			t.Errorf("scp /etc/passwd: exit %d, stderr %q; want the refusal", code, errOut)
		}
		if _, err := os.Stat(got); err == nil {
			t.Errorf("scp /etc/passwd made a local copy")
		}
		// sftp's get stats the path first (its glob) and prints "not
		// found" for any failed stat, whatever the status; the
		// server's line before it says why (docs/router.md).
		_, errOut, code = o.run(t, "sftp", "get /etc/passwd "+got+"\n", "-b", "-", "root@127.0.0.1")
		if code == 0 || !strings.Contains(errOut, "ocfw: /etc/passwd: only the card's view and /staging/ are reachable over sftp") {
			t.Errorf("sftp get /etc/passwd: exit %d, stderr %q; want the refusal", code, errOut)
		}
		// The docs show the client's own line too; if an OpenSSH
		// release words it otherwise, docs/router.md must follow.
		if !strings.Contains(errOut, `File "/etc/passwd" not found.`) {
			t.Errorf("sftp get /etc/passwd: stderr %q; docs/router.md shows %q", errOut, `File "/etc/passwd" not found.`)
		}
		if _, err := os.Stat(got); err == nil {
			t.Errorf("sftp get /etc/passwd made a local copy")
		}
		out, errOut, code := o.run(t, "sftp", "mkdir /staging/d\n", "-b", "-", "root@127.0.0.1")
		if code == 0 {
			t.Errorf("sftp mkdir in staging: exit 0\n%s%s", out, errOut)
		}
	})
}

// TestOpenSSHLoginName: only the configured name gets in.
func TestOpenSSHLoginName(t *testing.T) {
	tool(t, "ssh")
	path, signer := keyFile(t, ed25519Key(t))
	ts := startWithKeys(t, func(c *Config) { c.User = "admin" }, signer)
	o := newOpenSSH(t, ts, path)
	if out, errOut, code := o.run(t, "ssh", "", "admin@127.0.0.1", "echo in"); code != 0 || out != "in\n" {
		t.Errorf("admin: exit %d, %q %q; want in", code, out, errOut)
	}
	for _, user := range []string{"root", "Admin", "bob"} {
		_, errOut, code := o.run(t, "ssh", "", user+"@127.0.0.1", "echo in")
		if code != 255 || !strings.Contains(errOut, "Permission denied (publickey)") {
			t.Errorf("%s: exit %d, %q; want 255 and permission denied", user, code, errOut)
		}
	}
	// The server logs a failed login once the connection has ended,
	// which may be after the client has exited.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(ts.log.String(), `user "bob"`) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // hang guard
	}
	if log := ts.log.String(); !strings.Contains(log, `user "bob"`) {
		t.Errorf("the refused name is not logged:\n%s", log)
	}
}
