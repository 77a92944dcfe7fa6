package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/realclient"
	"github.com/ocfw/ocfw/router/config"
)

// boardOpenSSH runs the host's OpenSSH clients (ssh, scp, sftp: programs
// nobody here wrote) against the router through QEMU's forward of a
// host port to its LAN address.
type boardOpenSSH struct {
	key, known string
	port       int
}

// run runs name with the options and args; stdin is empty unless given.
func (o boardOpenSSH) run(t *testing.T, name, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin := realclient.Need(t, name)
	opts := realclient.OpenSSHArgs(o.key, o.known, o.port)
	if name != "ssh" {
		opts[len(opts)-2] = "-P" // scp's and sftp's port flag
	}
	stdout, stderr, code, err := realclient.OpenSSH(bin, 2*time.Minute, stdin, append(opts, args...)...)
	if err != nil {
		t.Fatalf("%s %v: %v\nstderr: %s", name, args, err, stderr)
	}
	return stdout, stderr, code
}

// sftpOnTheBoard checks the firmware's sftp subsystem with OpenSSH's scp
// (sftp protocol, its default) and sftp -b: the card's files read, an
// upload into /staging/ and nothing outside it nor over the limits, and
// a push made by hand through it (scp of site.json, ocf config apply,
// confirm) whose provisional config site.json shows at once. running is
// a text of the config the box runs now; next is a site.json that
// differs from it only by the text nextHas.
func sftpOnTheBoard(t *testing.T, o boardOpenSSH, running string, next []byte, nextHas string) {
	const host = "root@127.0.0.1:"
	local := t.TempDir()
	get := func(t *testing.T, name string) string {
		t.Helper()
		dst := filepath.Join(local, strings.ReplaceAll(name, "/", "-"))
		if _, errOut, code := o.run(t, "scp", "", host+"/"+name, dst); code != 0 {
			t.Fatalf("scp %s: exit %d: %s", name, code, errOut)
		}
		b, err := os.ReadFile(dst)
		must(t, err)
		return string(b)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(local, name)
		must(t, os.WriteFile(p, b, 0o600))
		return p
	}
	staged := func(t *testing.T) string {
		t.Helper()
		out, errOut, code := o.run(t, "sftp", "ls -1 /staging\n", "-b", "-", "root@127.0.0.1")
		if code != 0 {
			t.Fatalf("sftp ls /staging: exit %d: %s", code, errOut)
		}
		return out
	}
	t.Run("scp reads the card's files", func(t *testing.T) {
		if r := get(t, "report.json"); !json.Valid([]byte(r)) || len(r) < 100 {
			t.Errorf("report.json: %.200q", r)
		}
		if l := get(t, "log.txt"); !strings.Contains(l, "ssh: host key SHA256:") {
			t.Errorf("log.txt lacks the router's lines:\n%s", l)
		}
		if s := get(t, "site.json"); !strings.Contains(s, running) {
			t.Errorf("site.json is not the running config (%s):\n%s", running, s)
		}
	})
	t.Run("sftp lists the view, no key material", func(t *testing.T) {
		out, errOut, code := o.run(t, "sftp", "ls -1 /\nls -1 /reports\n", "-b", "-", "root@127.0.0.1")
		if code != 0 {
			t.Fatalf("sftp -b: exit %d: %s", code, errOut)
		}
		for _, want := range []string{"report.json", "log.txt", "site.json", "plan.json", "manifest.json", "staging", "boot-"} {
			if !strings.Contains(out, want) {
				t.Errorf("the listing lacks %s:\n%s", want, out)
			}
		}
		if strings.Contains(out, "host_key") || strings.Contains(out, ".keys") {
			t.Errorf("the listing names key material:\n%s", out)
		}
	})
	t.Run("upload into staging, nowhere else, within the limits", func(t *testing.T) {
		note := write("note.txt", []byte("hello from the PC\n"))
		if _, errOut, code := o.run(t, "scp", "", note, host+"/staging/note.txt"); code != 0 {
			t.Fatalf("scp into /staging/: exit %d: %s", code, errOut)
		}
		for _, dst := range []string{"/site.json", "/note.txt", "/reports/boot-1.json"} {
			_, errOut, code := o.run(t, "scp", "", note, host+dst)
			if code == 0 || !strings.Contains(errOut, "ermission denied") {
				t.Errorf("scp to %s: exit %d, %q; want permission denied", dst, code, errOut)
			}
		}
		big := write("big.bin", bytes.Repeat([]byte{'x'}, 300<<10))
		_, errOut, code := o.run(t, "scp", "", big, host+"/staging/big.bin")
		if code == 0 || !strings.Contains(errOut, "over the 256 KiB per-file limit") {
			t.Errorf("300 KiB into /staging/: exit %d, %q; want the per-file limit named", code, errOut)
		}
		if got := staged(t); !strings.Contains(got, "note.txt") || strings.Contains(got, "big.bin") {
			t.Errorf("staging holds:\n%s\nwant note.txt and no part of big.bin", got)
		}
		// What the hand push below stages must be the config alone.
		if _, errOut, code := o.run(t, "sftp", "rm /staging/note.txt\n", "-b", "-", "root@127.0.0.1"); code != 0 {
			t.Fatalf("sftp rm: exit %d: %s", code, errOut)
		}
		if s := get(t, "site.json"); !strings.Contains(s, running) {
			t.Errorf("site.json changed by uploads:\n%s", s)
		}
	})
	t.Run("a push by hand: site.json shows the provisional config", func(t *testing.T) {
		if _, errOut, code := o.run(t, "scp", "", write("site.json", next), host+"/staging/site.json"); code != 0 {
			t.Fatalf("scp site.json into /staging/: exit %d: %s", code, errOut)
		}
		out, errOut, code := o.run(t, "ssh", "", "root@127.0.0.1", "ocf config apply --confirm-within 120s")
		gen, ok := config.AppliedGen(out)
		if code != 0 || !ok {
			t.Fatalf("ocf config apply: exit %d\n%s%s", code, out, errOut)
		}
		// The box applies a second after it answers (so the answer
		// reaches the client before any restart).
		s := ""
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
			if s = get(t, "site.json"); strings.Contains(s, nextHas) {
				break
			}
		}
		status, _, _ := o.run(t, "ssh", "", "root@127.0.0.1", "ocf config status")
		if !strings.Contains(s, nextHas) || !strings.Contains(status, "is provisional") {
			t.Errorf("site.json while the push is provisional (%s) is not the pushed config (%s):\n%s", strings.TrimSpace(status), nextHas, s)
		}
		out, errOut, code = o.run(t, "ssh", "", "root@127.0.0.1", fmt.Sprintf("ocf config confirm %d", gen))
		if code != 0 || !strings.Contains(out, "confirmed") {
			t.Fatalf("ocf config confirm: exit %d\n%s%s", code, out, errOut)
		}
		if s := get(t, "site.json"); !strings.Contains(s, nextHas) {
			t.Errorf("site.json once confirmed is not the pushed config (%s):\n%s", nextHas, s)
		}
	})
}
