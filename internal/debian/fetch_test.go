package debian

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
*" update")
	if [ -n "$FAKE_APT_UPDATE_FAILS" ]; then
		n=$(cat ` + filepath.Join(bin, "update-fails") + ` 2>/dev/null || echo 0)
		echo $((n+1)) > ` + filepath.Join(bin, "update-fails") + `
		if [ "$n" -lt "$FAKE_APT_UPDATE_FAILS" ]; then
			echo "E: Failed to fetch bookworm-security/main/binary-i386/Packages  File has unexpected size (371952 != 372316). Mirror sync in progress?" >&2
			exit 100
		fi
	fi
	touch ` + filepath.Join(bin, "updated") + `; exit 0 ;;
*" depends linux-image-686") printf 'linux-image-686\n  Depends: linux-image-9.9-686\n' ;;
*" depends linux-image-9.9-686") printf 'linux-image-9.9-686\n  Depends: kmod\n |Depends: initramfs-tools\n' ;;
*" depends "*) echo "E: No packages found" >&2; exit 100 ;;
*" download linux-image-9.9-686:i386")
	if [ -n "$FAKE_APT_STALE" ] && [ ! -e ` + filepath.Join(bin, "updated") + ` ]; then
		echo "E: Failed to fetch linux-image-9.9-686_9.9-1_i386.deb  404  Not Found" >&2; exit 100
	fi
	echo deb > linux-image-9.9-686_9.9-1_i386.deb ;;
*" download linux-headers-9.9-common:i386=9.9-1") echo deb > linux-headers-9.9-common_9.9-1_all.deb ;;
*" download linux-kbuild-9.9:i386=1:9.9-1") echo deb > linux-kbuild-9.9_1%3a9.9-1_i386.deb ;;
*" download foo:i386 bar:i386") echo deb > foo_1.0-1_i386.deb; echo deb > bar_2%3a1.1_all.deb ;;
*" download bar:i386") echo deb > bar_2%3a1.1_all.deb ;;
*" download nodeb:i386") exit 0 ;;
*" download linux-headers-9.9-common:i386="*) echo "E: Version '${last#*=}' for 'linux-headers-9.9-common' was not found" >&2; exit 100 ;;
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

// TestFetchKernelUpdateRetries: a failed apt-get update (a mirror caught
// mid-sync) is tried again after a pause, up to three times in all.
func TestFetchKernelUpdateRetries(t *testing.T) {
	saved := updateWaits
	updateWaits = []time.Duration{time.Millisecond, time.Millisecond}
	t.Cleanup(func() { updateWaits = saved })
	for _, tc := range []struct {
		fails   string
		updates int
		wantErr bool
	}{
		{"1", 2, false},
		{"2", 3, false},
		{"3", 3, true},
	} {
		t.Run("fails"+tc.fails, func(t *testing.T) {
			logFile := fakeApt(t)
			t.Setenv("FAKE_APT_UPDATE_FAILS", tc.fails)
			var logged []string
			f := &Fetcher{CacheDir: t.TempDir(), Log: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }}
			deb, err := f.FetchKernel(context.Background(), "linux-image-686", "i386")
			updates := 0
			for _, c := range calls(t, logFile) {
				if strings.HasSuffix(c, " update") {
					updates++
				}
			}
			if updates != tc.updates {
				t.Errorf("apt-get update ran %d times, want %d", updates, tc.updates)
			}
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "Mirror sync in progress") {
					t.Fatalf("err = %v, want the last update's error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(deb) != "linux-image-9.9-686_9.9-1_i386.deb" {
				t.Errorf("deb = %s", deb)
			}
			if !strings.Contains(strings.Join(logged, "\n"), "retrying in") {
				t.Errorf("no retry logged: %q", logged)
			}
		})
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

// FetchExact downloads exactly the version asked for (an "all" package
// through the arch's lists, an epoch escaped in the file name), finds it
// in the cache the next time without apt, and says what to do when the
// archive has no such version.
func TestFetchExact(t *testing.T) {
	logFile := fakeApt(t)
	cache := t.TempDir()
	ctx := context.Background()
	f := &Fetcher{CacheDir: cache}
	for _, tc := range []struct{ pkg, version, file string }{
		{"linux-headers-9.9-common", "9.9-1", "linux-headers-9.9-common_9.9-1_all.deb"},
		{"linux-kbuild-9.9", "1:9.9-1", "linux-kbuild-9.9_1%3a9.9-1_i386.deb"},
	} {
		deb, err := f.FetchExact(ctx, tc.pkg, tc.version, "i386")
		if err != nil || deb != filepath.Join(cache, "debian", "i386", "debs", tc.file) {
			t.Fatalf("%s %s: %s, %v", tc.pkg, tc.version, deb, err)
		}
		n := len(calls(t, logFile))
		again, err := f.FetchExact(ctx, tc.pkg, tc.version, "i386")
		if err != nil || again != deb || len(calls(t, logFile)) != n {
			t.Errorf("%s again: %s, %v, apt calls %d -> %d", tc.pkg, again, err, n, len(calls(t, logFile)))
		}
		name, version, _, ok := ParseDebName(deb)
		if !ok || name != tc.pkg || version != tc.version {
			t.Errorf("ParseDebName(%s) = %s %s %v", deb, name, version, ok)
		}
	}
	_, err := f.FetchExact(ctx, "linux-headers-9.9-common", "9.8-1", "i386")
	var old *OldVersionError
	if !errors.As(err, &old) || !strings.Contains(err.Error(), "Version '9.8-1'") || !strings.Contains(err.Error(), "refresh") {
		t.Errorf("missing version: %v", err)
	}
	for _, bad := range [][2]string{{"linux-kbuild-9.9", "9.9 -oX=1"}, {"linux-kbuild-9.9", ""}, {"../x", "1"}} {
		if _, err := f.FetchExact(ctx, bad[0], bad[1], "i386"); err == nil || !strings.Contains(err.Error(), "invalid Debian") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseDebName(t *testing.T) {
	for _, tc := range []struct {
		file, name, version, arch string
		ok                        bool
	}{
		{"/c/linux-image-6.1.0-57-686_6.1.192-3_i386.deb", "linux-image-6.1.0-57-686", "6.1.192-3", "i386", true},
		{"x_2%3a1.0_all.deb", "x", "2:1.0", "all", true},
		{"x_1.0.deb", "", "", "", false},
		{"x_1.0_i386.tar", "", "", "", false},
		{"_1.0_i386.deb", "", "", "", false},
	} {
		n, v, a, ok := ParseDebName(tc.file)
		if n != tc.name || v != tc.version || a != tc.arch || ok != tc.ok {
			t.Errorf("%s: %q %q %q %v", tc.file, n, v, a, ok)
		}
	}
}

func TestFetchPackages(t *testing.T) {
	logFile := fakeApt(t)
	cache := t.TempDir()
	ctx := context.Background()
	f := &Fetcher{CacheDir: cache}
	debs := filepath.Join(cache, "debian", "i386", "debs")
	want := []string{filepath.Join(debs, "foo_1.0-1_i386.deb"), filepath.Join(debs, "bar_2%3a1.1_all.deb")}
	// Package lists from an earlier update: no update now.
	lists := filepath.Join(cache, "debian", "i386", "lists")
	if err := os.MkdirAll(lists, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lists, "x_Packages"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := f.FetchPackages(ctx, "i386", []string{"foo", "bar"})
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("FetchPackages: %v, %v; want %v", got, err, want)
	}
	if c := calls(t, logFile); len(c) != 1 || !strings.HasSuffix(c[0], " download foo:i386 bar:i386") {
		t.Fatalf("apt calls %q, want one download of both", c)
	}
	// Cached: no apt at all; one package gone: only it is downloaded.
	if again, err := f.FetchPackages(ctx, "i386", []string{"foo", "bar"}); err != nil || len(again) != 2 || len(calls(t, logFile)) != 1 {
		t.Fatalf("cached FetchPackages: %v, %v, %d apt calls", again, err, len(calls(t, logFile)))
	}
	os.Remove(filepath.Join(debs, "bar.fetched"))
	if again, err := f.FetchPackages(ctx, "i386", []string{"foo", "bar"}); err != nil || again[1] != want[1] {
		t.Fatalf("FetchPackages after losing bar: %v, %v", again, err)
	}
	if c := calls(t, logFile); len(c) != 2 || !strings.HasSuffix(c[1], " download bar:i386") {
		t.Fatalf("apt calls %q, want a third one downloading bar only", c)
	}
	// A package apt-get does not deliver is named.
	if _, err := f.FetchPackages(ctx, "i386", []string{"foo", "nodeb"}); err == nil || !strings.Contains(err.Error(), "no .deb for nodeb") {
		t.Errorf("undelivered package: %v", err)
	}
	if _, err := f.FetchPackages(ctx, "i386", []string{"foo", "-oX=1"}); err == nil || !strings.Contains(err.Error(), "invalid Debian package") {
		t.Errorf("bad name: %v", err)
	}
}
