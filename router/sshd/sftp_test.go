package sshd

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"
)

// sftpClient opens the sftp subsystem on a new session of ts with
// pkg/sftp's own client: for what OpenSSH's clients do not ask.
func sftpClient(t *testing.T, ts *testServer) *sftp.Client {
	t.Helper()
	c := ts.login(t)
	t.Cleanup(func() { c.Close() })
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	cl, err := sftp.NewClientPipe(r, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func TestSFTPTreeRefusals(t *testing.T) {
	staging := t.TempDir()
	ts := start(t, func(c *Config) {
		c.View = func() []ViewFile {
			return []ViewFile{
				{Path: "report.json", Read: func() ([]byte, error) { return []byte("{}"), nil }},
				{Path: "manifest.json", Read: func() ([]byte, error) { return nil, errors.New("no boot partition") }},
			}
		}
		c.StagingDir = staging
		c.MaxSessions = 1
	})
	cl := sftpClient(t, ts)
	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, os.ErrPermission) {
			t.Errorf("%s: %v, want permission denied", what, err)
		}
	}
	_, err := cl.Stat("/staging/../../etc/passwd")
	denied("stat through ..", err)
	_, err = cl.Open("/etc/passwd")
	denied("open /etc/passwd", err)
	denied("mkdir in staging", cl.Mkdir("/staging/d"))
	denied("symlink into staging", cl.Symlink("/etc/passwd", "/staging/p"))
	denied("remove a view file", cl.Remove("/report.json"))
	denied("rename out of staging", func() error {
		f, err := cl.Create("/staging/a")
		if err != nil {
			return err
		}
		f.Close()
		return cl.Rename("/staging/a", "/a")
	}())
	denied("chmod a view file", cl.Chmod("/report.json", 0o777))
	if _, err := cl.Stat("/nothing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat /nothing: %v, want not found", err)
	}
	// A view file that cannot be read is listed and says why.
	fis, err := cl.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range fis {
		names = append(names, fi.Name())
	}
	if got := strings.Join(names, " "); got != "manifest.json report.json staging" {
		t.Errorf("ls /: %s", got)
	}
	if f, err := cl.Open("/manifest.json"); err == nil {
		_, err = io.ReadAll(f)
		t.Errorf("reading an unreadable view file: %v", err)
	} else if !strings.Contains(err.Error(), "no boot partition") {
		t.Errorf("open /manifest.json: %v, want the reason", err)
	}
	// A staged file is read back as written.
	f, err := cl.Create("/staging/k")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("key"))
	f.Close()
	if b, err := os.ReadFile(filepath.Join(staging, "k")); err != nil || string(b) != "key" {
		t.Errorf("staged k: %q, %v", b, err)
	}
	// The sftp session is a session: with MaxSessions 1 it takes the
	// connection's only place.
	c := ts.login(t)
	defer c.Close()
	s1, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	if err := s1.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	if s2, err := c.NewSession(); err == nil {
		s2.Close()
		t.Error("a second session beside an sftp one, over MaxSessions 1")
	}
}

// stagedNames is what `ocf config apply` takes from dir
// (config.ReadStaged, which this package's tests cannot import): the
// regular files whose names do not start with ".".
func stagedNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			n = append(n, e.Name())
		}
	}
	return n
}

// TestStagingPartial: an upload paused half-way is not in /staging for
// another session (ls, stat, get) nor for the apply path; once its
// client closes it, it is there whole. An upload a stopped server left
// behind is gone when the next one starts.
func TestStagingPartial(t *testing.T) {
	staging := t.TempDir()
	// A power cut mid-upload, as the previous server left it.
	if err := os.WriteFile(filepath.Join(staging, ".upload-123"), []byte(`{"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := start(t, func(c *Config) { c.StagingDir = staging })
	if left, _ := filepath.Glob(filepath.Join(staging, ".*")); len(left) != 0 {
		t.Errorf("a new server left %v in staging", left)
	}
	up, other := sftpClient(t, ts), sftpClient(t, ts)
	whole := []byte(strings.Repeat(`{"kind": "site"}`, 1000))
	f, err := up.Create("/staging/site.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(whole[:len(whole)/2]); err != nil {
		t.Fatal(err)
	}
	invisible := func(when string) {
		t.Helper()
		es, err := other.ReadDir("/staging")
		if err != nil {
			t.Fatalf("%s: ls /staging: %v", when, err)
		}
		for _, e := range es {
			t.Errorf("%s: ls /staging shows %s (%d bytes)", when, e.Name(), e.Size())
		}
		if fi, err := other.Stat("/staging/site.json"); err == nil {
			t.Errorf("%s: stat /staging/site.json: %d bytes, want not found", when, fi.Size())
		}
		if r, err := other.Open("/staging/site.json"); err == nil {
			b, _ := io.ReadAll(r)
			r.Close()
			t.Errorf("%s: get /staging/site.json read %d bytes, want not found", when, len(b))
		}
		if n := stagedNames(t, staging); len(n) != 0 {
			t.Errorf("%s: the apply path would take %v", when, n)
		}
	}
	invisible("half-way")
	if _, err := f.Write(whole[len(whole)/2:]); err != nil {
		t.Fatal(err)
	}
	invisible("written, not closed")
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v\nlog:\n%s", err, ts.log)
	}
	r, err := other.Open("/staging/site.json")
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(got) != string(whole) {
		t.Errorf("after close: read %d bytes (%v), want the %d uploaded", len(got), err, len(whole))
	}
	if n := stagedNames(t, staging); len(n) != 1 || n[0] != "site.json" {
		t.Errorf("after close the apply path takes %v, want [site.json]", n)
	}
	if left, _ := filepath.Glob(filepath.Join(staging, ".*")); len(left) != 0 {
		t.Errorf("after close, staging still holds %v", left)
	}
}
