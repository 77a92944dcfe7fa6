package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ocfw/ocfw/firmware"
)

// TestOutputTargets: every command that writes a file refuses, before
// writing anything, a target that is not a regular file (a FIFO, a link
// to /dev/null or /dev/full, a directory) with an error naming the flag,
// and an existing file without --force; with --force it goes ahead. No
// real device is ever written: the links' targets are only looked at.
func TestOutputTargets(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dir, "sites"), 0o755))
	for _, n := range []string{"site-a.yaml", "site-b.yaml", "alix2d13.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/sites", n))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "sites", n), data, 0o644))
	}
	siteA, siteB, alix := filepath.Join(dir, "sites/site-a.yaml"), filepath.Join(dir, "sites/site-b.yaml"), filepath.Join(dir, "sites/alix2d13.yaml")
	report := filepath.Join(dir, "speed.json")
	if _, errs, code := ocfw(t, "speed", "--cipher", "aes-128-cbc", "--seconds", "0.01", "--size", "16", "-o", report); code != 0 {
		t.Fatalf("speed: exit %d: %s", code, errs)
	}

	// Each command with T where its output file goes; written says a
	// successful run writes T (so --force must change it).
	cmds := []struct {
		name    string
		flag    string
		args    []string
		written bool
		ext     string // the target's name must end so
		// noRun: the command would go on to a build; only its
		// refusals are tried (build's own row shows --force passes).
		noRun bool
	}{
		{"site json", "-o", []string{"site", "json", alix, "-o", "T"}, true, ".json", false},
		{"tunnel keys", "-o", []string{"tunnel", "keys", "--site", siteA, "--site", siteB, "-o", "T"}, true, ".keys", false},
		{"speed", "-o", []string{"speed", "--cipher", "aes-128-cbc", "--seconds", "0.01", "--size", "16", "-o", "T"}, true, ".json", false},
		{"selftest", "-o", []string{"selftest", "--cipher", "aes-128-cbc", "-o", "T"}, true, ".json", false},
		{"report chart", "-o", []string{"report", "-q", report, "--reference=none", "-o", "T"}, true, ".svg", false},
		{"build", "-o", []string{"build", "--board", "alix2d13", "--kernel", filepath.Join(dir, "no-kernel"), "-o", "T"}, false, ".img", false},
		{"try", "-o", []string{"try", "--board", "alix2d13", "-o", "T"}, false, ".img", true},
		{"try keep-copy", "--keep-copy", []string{"try", "--board", "alix2d13", "-o", filepath.Join(dir, "new.img"), "--keep-copy", "T"}, false, ".img", true},
		{"run keep-copy", "--keep-copy", []string{"run", "--keep-copy", "T", filepath.Join(dir, "no.img")}, false, ".img", false},
	}
	type target struct {
		name  string
		make  func(t *testing.T, p string)
		force bool
		want  string // in the error; "" = the target is taken
	}
	fifo := func(t *testing.T, p string) { must(t, syscall.Mkfifo(p, 0o644)) }
	link := func(to string) func(t *testing.T, p string) {
		return func(t *testing.T, p string) { must(t, os.Symlink(to, p)) }
	}
	file := func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte("earlier\n"), 0o644)) }
	targets := []target{
		{"FIFO", fifo, true, "is a FIFO (named pipe), not a regular file"},
		{"link to /dev/null", link("/dev/null"), true, "is a character device, not a regular file"},
		{"link to /dev/full", link("/dev/full"), true, "is a character device, not a regular file"},
		{"directory", func(t *testing.T, p string) { must(t, os.Mkdir(p, 0o755)) }, true, "is a directory, not a regular file"},
		{"existing file", file, false, "exists"},
		{"existing file, --force", file, true, ""},
	}
	for _, c := range cmds {
		for _, tg := range targets {
			t.Run(c.name+"/"+tg.name, func(t *testing.T) {
				if c.noRun && tg.want == "" {
					t.Skip("would build an image")
				}
				p := filepath.Join(t.TempDir(), "out"+c.ext)
				tg.make(t, p)
				before, _ := os.Lstat(p)
				var content []byte
				if before.Mode().IsRegular() {
					content, _ = os.ReadFile(p)
				}
				args := append([]string(nil), c.args...)
				for j, a := range args {
					if a == "T" {
						args[j] = p
					}
				}
				if tg.force {
					args = append(args, "--force")
				}
				_, errs, code := ocfw(t, args...)
				after, err := os.Lstat(p)
				if err != nil {
					t.Fatalf("the target is gone: %v", err)
				}
				if tg.want != "" {
					named := c.flag + " " + p
					if c.name == "tunnel keys" && strings.HasPrefix(tg.name, "existing") {
						named = p // its own refusal, which says what replacing keys means
					}
					if code == 0 || !strings.Contains(errs, named) || !strings.Contains(errs, tg.want) {
						t.Fatalf("exit %d; want an error naming %s %s and saying %q:\n%s", code, c.flag, p, tg.want, errs)
					}
					if after.Mode() != before.Mode() {
						t.Errorf("the target changed from %v to %v", before.Mode(), after.Mode())
					}
					if content != nil {
						if now, _ := os.ReadFile(p); !bytes.Equal(now, content) {
							t.Error("the existing file was changed")
						}
					}
					if strings.HasPrefix(tg.name, "existing") && !strings.Contains(errs, "--force") {
						t.Errorf("the refusal does not say how to replace it: %s", errs)
					}
					return
				}
				if strings.Contains(errs, "not a regular file") || strings.Contains(errs, "the file exists") {
					t.Fatalf("--force refused: %s", errs)
				}
				if c.written {
					now, _ := os.ReadFile(p)
					if code != 0 || bytes.Equal(now, content) || !after.Mode().IsRegular() {
						t.Errorf("--force: exit %d, the file replaced: %v\n%s", code, !bytes.Equal(now, content), errs)
					}
				}
			})
		}
	}

	// An earlier build's image is replaced without --force: a rebuild.
	img := filepath.Join(dir, "earlier.img")
	file(t, img)
	file(t, firmware.ManifestPath(img))
	if _, errs, _ := ocfw(t, "build", "--board", "alix2d13", "--kernel", filepath.Join(dir, "no-kernel"), "-o", img); strings.Contains(errs, "exists") {
		t.Errorf("an earlier build's image is refused: %s", errs)
	}
	// --export: a folder, and its files as -o's.
	if _, errs, code := ocfw(t, "report", "-q", report, "--export", report); code == 0 || !strings.Contains(errs, "--export "+report+": not a folder") {
		t.Errorf("--export to a file: exit %d: %s", code, errs)
	}
	exp := filepath.Join(dir, "export")
	if _, errs, code := ocfw(t, "report", "-q", report, "--export", exp); code != 0 {
		t.Fatalf("--export: exit %d: %s", code, errs)
	}
	if _, errs, code := ocfw(t, "report", "-q", report, "--export", exp); code == 0 || !strings.Contains(errs, "--export "+exp) || !strings.Contains(errs, "add --force") {
		t.Errorf("--export over an earlier export: exit %d: %s", code, errs)
	}
	if _, errs, code := ocfw(t, "report", "-q", report, "--export", exp, "--force"); code != 0 {
		t.Errorf("--export --force: exit %d: %s", code, errs)
	}
}
