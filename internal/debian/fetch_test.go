package debian

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeApt puts apt-get and apt-cache stand-ins first in PATH. They log
// every call and behave like apt for linux-image-686 → linux-image-9.9-686.
func fakeApt(t *testing.T) (logFile string) {
	t.Helper()
	bin := t.TempDir()
	logFile = filepath.Join(bin, "calls.log")
	script := `#!/bin/sh
echo "$(basename "$0") $*" >> ` + logFile + `
for a in "$@"; do last="$a"; done
case "$*" in
*" update") touch ` + filepath.Join(bin, "updated") + `; exit 0 ;;
*" depends linux-image-686") printf 'linux-image-686\n  Depends: linux-image-9.9-686\n' ;;
*" depends linux-image-9.9-686") printf 'linux-image-9.9-686\n  Depends: kmod\n |Depends: initramfs-tools\n' ;;
*" depends "*) echo "E: No packages found" >&2; exit 100 ;;
*" download linux-image-9.9-686:i386")
	if [ -n "$FAKE_APT_STALE" ] && [ ! -e ` + filepath.Join(bin, "updated") + ` ]; then
		echo "E: Failed to fetch linux-image-9.9-686_9.9-1_i386.deb  404  Not Found" >&2; exit 100
	fi
	echo deb > linux-image-9.9-686_9.9-1_i386.deb ;;
*) echo "E: unexpected: $*" >&2; exit 100 ;;
esac
`
	for _, name := range []string{"apt-get", "apt-cache"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logFile
}

func calls(t *testing.T, logFile string) []string {
	b, err := os.ReadFile(logFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestFetchKernelUsesCache(t *testing.T) {
	logFile := fakeApt(t)
	cache := t.TempDir()
	ctx := context.Background()

	if _, err := CachedKernel("linux-image-686", "i386", cache); !errors.Is(err, ErrNotCached) {
		t.Fatalf("empty cache: err = %v, want ErrNotCached", err)
	}
	deb, err := FetchKernel(ctx, "linux-image-686", "i386", cache)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(deb) != "linux-image-9.9-686_9.9-1_i386.deb" || !strings.HasPrefix(deb, cache) {
		t.Errorf("deb = %s", deb)
	}
	first := calls(t, logFile)
	wantTools := []string{"apt-get", "apt-cache", "apt-cache", "apt-get"}
	if len(first) != len(wantTools) {
		t.Fatalf("apt calls = %q", first)
	}
	for i, c := range first {
		if !strings.HasPrefix(c, wantTools[i]+" ") {
			t.Errorf("call %d = %q, want %s", i, c, wantTools[i])
		}
		// Every call keeps apt's state private and targets i386.
		for _, opt := range []string{"-oAPT::Architecture=i386", "-oDir::State::Lists=" + cache, "-oDir::Cache=" + cache} {
			if !strings.Contains(c, opt) {
				t.Errorf("call %q lacks %s", c, opt)
			}
		}
	}

	// Second run: from the cache, no apt at all.
	again, err := FetchKernel(ctx, "linux-image-686", "i386", cache)
	if err != nil || again != deb {
		t.Fatalf("second fetch = %s, %v", again, err)
	}
	if n := len(calls(t, logFile)); n != len(first) {
		t.Errorf("second fetch ran apt (%d calls in all)", n)
	}
	if got, err := CachedKernel("linux-image-686", "i386", cache); err != nil || got != deb {
		t.Errorf("CachedKernel = %s, %v", got, err)
	}

	// Refresh goes to apt again, update included.
	if _, err := (&Fetcher{CacheDir: cache, Refresh: true}).FetchKernel(ctx, "linux-image-686", "i386"); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, logFile); len(c) != 2*len(first) || !strings.HasSuffix(c[len(first)], " update") {
		t.Errorf("refresh calls = %q", c[len(first):])
	}

	// A deleted .deb is not cached any more.
	os.Remove(deb)
	if _, err := CachedKernel("linux-image-686", "i386", cache); !errors.Is(err, ErrNotCached) {
		t.Errorf("deleted deb: err = %v", err)
	}
}

// Package lists left by an earlier run can name a version the archive
// has dropped: the fetch updates them once and retries.
func TestFetchKernelStaleLists(t *testing.T) {
	logFile := fakeApt(t)
	t.Setenv("FAKE_APT_STALE", "1")
	cache := t.TempDir()
	lists := filepath.Join(cache, "debian", "i386", "lists")
	os.MkdirAll(lists, 0o755)
	os.WriteFile(filepath.Join(lists, "old_main_binary-i386_Packages.lz4"), nil, 0o644)
	if _, err := FetchKernel(context.Background(), "linux-image-686", "i386", cache); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, c := range calls(t, logFile) {
		f := strings.Fields(c)
		tools = append(tools, f[0]+" "+f[len(f)-1])
	}
	want := "apt-cache linux-image-686|apt-cache linux-image-9.9-686|apt-get linux-image-9.9-686:i386|apt-get update|" +
		"apt-cache linux-image-686|apt-cache linux-image-9.9-686|apt-get linux-image-9.9-686:i386"
	if got := strings.Join(tools, "|"); got != want {
		t.Errorf("calls:\n got %s\nwant %s", got, want)
	}
}

func TestFetchKernelErrors(t *testing.T) {
	fakeApt(t)
	cache := t.TempDir()
	tests := []struct{ pkg, arch, want string }{
		{"no-such-package", "i386", "No packages found"},
		{"../etc", "i386", "invalid Debian package name"},
		{"linux-image-686", "i386 -oX=1", "invalid Debian architecture"},
	}
	for _, tt := range tests {
		_, err := FetchKernel(context.Background(), tt.pkg, tt.arch, cache)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("FetchKernel(%q, %q) err = %v, want %q", tt.pkg, tt.arch, err, tt.want)
		}
	}
}

func TestKernelDependency(t *testing.T) {
	tests := []struct{ pkg, out, want string }{
		{"linux-image-686", "linux-image-686\n  Depends: linux-image-6.1.0-57-686\n", "linux-image-6.1.0-57-686"},
		{"linux-image-686", "linux-image-686\n  Depends: <linux-image-6.1.0-57-686:i386>\n", "linux-image-6.1.0-57-686"},
		{"linux-image-6.1.0-57-686", "linux-image-6.1.0-57-686\n  Depends: kmod\n  Depends: linux-base\n |Depends: initramfs-tools\n  Recommends: firmware-linux-free\n", ""},
		{"linux-image-6.1.0-57-686", "linux-image-6.1.0-57-686\n  Breaks: linux-image-6.1.0-57-686-dbg\n", ""},
	}
	for _, tt := range tests {
		if got := kernelDependency(tt.pkg, tt.out); got != tt.want {
			t.Errorf("kernelDependency(%q) = %q, want %q", tt.pkg, got, tt.want)
		}
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("OCFW_CACHE", "/x/ocfw-cache")
	if d, _ := DefaultCacheDir(); d != "/x/ocfw-cache" {
		t.Errorf("OCFW_CACHE: %s", d)
	}
	t.Setenv("OCFW_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, _ := DefaultCacheDir(); d != "/xdg/ocfw" {
		t.Errorf("XDG_CACHE_HOME: %s", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := DefaultCacheDir(); d != "/home/u/.cache/ocfw" {
		t.Errorf("HOME: %s", d)
	}
}
