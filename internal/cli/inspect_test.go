package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/firmware"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/lab/labtest"
)

// smallImage builds a 74 MiB alix2d13 image through the CLI (Debian's
// cached kernel, a stand-in initramfs) and returns its path and manifest.
func smallImage(t *testing.T) (string, *firmware.Manifest) {
	t.Helper()
	if err := firmware.CheckTools("bios-cf"); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	deb, err := debian.CachedKernel("linux-image-686", "i386", "")
	if err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd.xz")
	must(t, os.WriteFile(initrd, append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 1000)...), 0o644))
	img := filepath.Join(dir, "alix.img")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if _, errs, code := ocfw(t, "build", "--board", "alix2d13", "--kernel", deb, "--initramfs", initrd, "--size", "74", "-o", img); code != 0 {
		t.Fatalf("build: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(firmware.ManifestPath(img))
	must(t, err)
	m, err := firmware.ReadManifest(b)
	must(t, err)
	return img, m
}

// copyImage copies the image, its manifest and sha256sums into a new
// directory.
func copyImage(t *testing.T, img string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{img, firmware.ManifestPath(img), firmware.SumsPath(img)} {
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644))
	}
	return filepath.Join(dir, filepath.Base(img))
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// bootFS opens the image's boot file system.
func bootFS(t *testing.T, img string, m *firmware.Manifest) (*fat.FS, int64) {
	t.Helper()
	f, err := os.Open(img)
	must(t, err)
	t.Cleanup(func() { f.Close() })
	boot := m.Layout[1]
	fs, err := fat.Open(f, boot.Offset, boot.Size)
	must(t, err)
	return fs, boot.Offset
}

// Any problem inspect finds in an image is a non-zero exit, with the
// whole description still printed (text or JSON). Torn store records are
// notes, not problems.
func TestInspectExitStatus(t *testing.T) {
	img, m := smallImage(t)
	boot, data := m.Layout[1], m.Layout[2]
	cluster := func(fs *fat.FS, off int64) uint32 { return uint32((off-fs.MetadataBytes())/fs.ClusterBytes()) + 2 }
	setFAT := func(t *testing.T, p string, fs *fat.FS, c, v uint32) { // FAT16, every copy
		for i := 0; i < fs.NumFATs; i++ {
			off := boot.Offset + int64(fs.ReservedSectors+i*int(fs.FATSectors))*int64(fs.BytesPerSector) + 2*int64(c)
			patch(t, p, off, binary.LittleEndian.AppendUint16(nil, uint16(v)))
		}
	}
	noSidecar := func(t *testing.T, p string) { must(t, os.Remove(firmware.ManifestPath(p))) }
	sidecar := func(t *testing.T, p string, f func([]byte) []byte) {
		b, err := os.ReadFile(firmware.ManifestPath(p))
		must(t, err)
		must(t, os.WriteFile(firmware.ManifestPath(p), f(b), 0o644))
	}
	flip := func(at func([]byte) int) func(t *testing.T, p string) {
		return func(t *testing.T, p string) {
			sidecar(t, p, func(b []byte) []byte { b[at(b)] ^= 0x01; return b })
		}
	}
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, p string)
		want    string // in the problems; "" = a clean image, exit 0
	}{
		{"clean", func(*testing.T, string) {}, ""},
		{"torn store record: a note, not a problem", func(t *testing.T, p string) {
			noSidecar(t, p)
			for _, e := range m.Store {
				if strings.HasSuffix(e.Path, "/state-a.bin") {
					patch(t, p, e.Offset+10, []byte{0x5a}) // part of a record header, as a torn write leaves it
				}
			}
		}, ""},
		{"0 bytes per sector", func(t *testing.T, p string) {
			noSidecar(t, p)
			patch(t, p, boot.Offset+11, []byte{0, 0})
		}, "partition 1: fat: 0 bytes per sector"},
		{"cluster chain loop", func(t *testing.T, p string) {
			noSidecar(t, p)
			fs, _ := bootFS(t, p, m)
			e, err := fs.Extent(firmware.BootKernel)
			must(t, err)
			c := cluster(fs, e.Offset)
			setFAT(t, p, fs, c+1, c) // the kernel's second cluster leads back to its first
		}, "/a/vmlinuz: fat: cluster chain loops"},
		{"directory cycle", func(t *testing.T, p string) {
			noSidecar(t, p)
			fs, off := bootFS(t, p, m)
			root, err := fs.ReadDir("/")
			must(t, err)
			var bootDir uint32
			for _, e := range root {
				if e.Name == "boot" {
					bootDir = e.Cluster()
				}
			}
			// /boot/syslinux's entry points back at /boot.
			dirAt := off + fs.MetadataBytes() + int64(bootDir-2)*fs.ClusterBytes()
			raw := make([]byte, fs.ClusterBytes())
			f, err := os.Open(p)
			must(t, err)
			f.ReadAt(raw, dirAt)
			f.Close()
			i := bytes.Index(raw, []byte("SYSLINUX   "))
			if i < 0 || i%32 != 0 {
				t.Fatalf("no syslinux entry in /boot")
			}
			patch(t, p, dirAt+int64(i)+26, binary.LittleEndian.AppendUint16(nil, uint16(bootDir)))
		}, "directory cycle: /boot/syslinux is /boot again"},
		{"data partition without 55 AA", func(t *testing.T, p string) {
			noSidecar(t, p)
			patch(t, p, data.Offset+510, []byte{0, 0})
		}, "partition 2: fat: no boot sector signature (55 AA)"},
		{"corrupted embedded manifest", func(t *testing.T, p string) {
			noSidecar(t, p)
			fs, off := bootFS(t, p, m)
			e, err := fs.Extent(firmware.BootManifest)
			must(t, err)
			patch(t, p, off+e.Offset, []byte("X"))
		}, "partition 1: /ocfw/manifest.json: not an ocfw manifest"},
		{"0-byte sidecar manifest", func(t *testing.T, p string) {
			sidecar(t, p, func([]byte) []byte { return nil })
		}, "alix.img.manifest.json is empty: not a manifest"},
		{"truncated sidecar manifest", func(t *testing.T, p string) {
			sidecar(t, p, func(b []byte) []byte { return b[:len(b)/2] })
		}, "alix.img.manifest.json: not an ocfw manifest: unexpected end of JSON input"},
		{"bit flip in the image sha256", flip(func(b []byte) int {
			return bytes.Index(b, []byte(m.Image.SHA256)) + 10
		}), "the image no longer matches its manifest"},
		{"bit flip in a block-map checksum", flip(func(b []byte) int {
			return bytes.Index(b, []byte(m.BlockMap.Ranges[0].SHA256)) + 3
		}), "does not match its sha256 in"},
		{"bit flip in a field name", flip(func(b []byte) int { return bytes.Index(b, []byte(`"source_date_epoch"`)) + 2 }),
			`unknown field "snurce_date_epoch"`},
		{"bit flip in the middle", flip(func(b []byte) int { return len(b) / 2 }), "alix.img.manifest.json"},
		{"sidecar for another board", func(t *testing.T, p string) {
			sidecar(t, p, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"board": "alix2d13"`), []byte(`"board": "net5501"`), 1)
			})
			// with a matching sha256sums, so only the board gives it away
			mb, err := os.ReadFile(firmware.ManifestPath(p))
			must(t, err)
			sum := sha256.Sum256(mb)
			sums, err := os.ReadFile(firmware.SumsPath(p))
			must(t, err)
			var out []string
			for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
				if strings.HasSuffix(l, "  alix.img.manifest.json") {
					l = hex.EncodeToString(sum[:]) + "  alix.img.manifest.json"
				}
				out = append(out, l)
			}
			must(t, os.WriteFile(firmware.SumsPath(p), []byte(strings.Join(out, "\n")+"\n"), 0o644))
		}, `is for board "net5501", but the image's own manifest (/ocfw/manifest.json) says "alix2d13"`},
		{"image changed after the build", func(t *testing.T, p string) {
			patch(t, p, m.Store[0].Offset, []byte("booted"))
		}, "the image no longer matches its manifest (sha256): it was changed after the build (booted in place, not as a copy, or written to); 1 of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := copyImage(t, img)
			tc.corrupt(t, p)
			out, errs, code := ocfw(t, "inspect", p)
			if tc.want == "" {
				if code != 0 || strings.Contains(out, "problem:") {
					t.Fatalf("clean image: exit %d\n%s%s", code, out, errs)
				}
				if strings.HasPrefix(tc.name, "torn") && !strings.Contains(out, "  note: state-a.bin") {
					t.Errorf("the torn record is not noted:\n%s", out)
				}
				return
			}
			if code == 0 {
				t.Errorf("exit 0 for a corrupted image\n%s", out)
			}
			if !strings.Contains(out, "problem: ") || !strings.Contains(out, tc.want) {
				t.Errorf("output lacks the problem %q:\n%s", tc.want, out)
			}
			if !strings.Contains(errs, "problem(s), listed above") {
				t.Errorf("stderr: %q", errs)
			}
			// With --json the JSON still comes out in full, then exit 1.
			out, errs, code = ocfw(t, "inspect", "--json", p)
			var info firmware.Info
			if code == 0 || json.Unmarshal([]byte(out), &info) != nil || len(info.Problems) == 0 || !strings.Contains(errs, `in "problems"`) {
				t.Errorf("--json: exit %d, %d problems, stderr %q", code, len(info.Problems), errs)
			}
		})
	}
}

// The flash findings through the CLI: an absent /dev target and a changed
// image are refused before anything is asked or written, and no message
// carries "(<nil>)".
func TestFlashCLIRefusals(t *testing.T) {
	img, m := smallImage(t)
	absent := "/dev/ocfw-test-absent-cli"
	t.Cleanup(func() { os.Remove(absent) })
	_, errs, code := ocfw(t, "flash", img, absent)
	if code == 0 || !strings.Contains(errs, "refusing "+absent+": there is no such device") || !strings.Contains(errs, "lsblk") || strings.Contains(errs, "<nil>") {
		t.Errorf("flash to an absent /dev target: exit %d: %s", code, errs)
	}
	if _, err := os.Lstat(absent); !os.IsNotExist(err) {
		t.Errorf("flash created %s", absent)
	}
	patch(t, img, m.Store[0].Offset, []byte("booted"))
	target := filepath.Join(t.TempDir(), "card.bin")
	_, errs, code = ocfw(t, "flash", "--yes", img, target)
	if code == 0 || !strings.Contains(errs, "the image changed since it was built") || !strings.Contains(errs, "nothing was written") ||
		strings.Contains(errs, "verify failed") || strings.Contains(errs, "<nil>") {
		t.Errorf("flash of a changed image: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the refused flash created %s", target)
	}
}
