package debian

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// ErrNotCached reports that a package is not in the cache and fetching it
// was not asked for.
var ErrNotCached = errors.New("package not in the cache")

// DefaultCacheDir is $OCFW_CACHE, else $XDG_CACHE_HOME/ocfw, else
// ~/.cache/ocfw.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("OCFW_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "ocfw"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set OCFW_CACHE (%v)", err)
	}
	return filepath.Join(home, ".cache", "ocfw"), nil
}

// Fetcher downloads Debian packages for any architecture without root,
// keeping apt's package lists and the downloaded .debs in a private cache.
type Fetcher struct {
	CacheDir string // "" means DefaultCacheDir
	Refresh  bool   // update the package lists and download even when cached
	Log      func(format string, args ...any)
}

// FetchKernel returns the cached .deb of kernel package pkg for arch
// (e.g. "linux-image-686", "i386"), downloading it with apt-get when it
// is not cached. A metapackage such as linux-image-686 is resolved to the
// versioned package it depends on (linux-image-6.1.0-N-686), which is the
// one that holds the kernel. cacheDir "" means DefaultCacheDir.
func FetchKernel(ctx context.Context, pkg, arch, cacheDir string) (debPath string, err error) {
	return (&Fetcher{CacheDir: cacheDir}).FetchKernel(ctx, pkg, arch)
}

// CachedKernel returns the cached .deb for pkg and arch without any network
// access, or an error wrapping ErrNotCached.
func CachedKernel(pkg, arch, cacheDir string) (string, error) {
	f := &Fetcher{CacheDir: cacheDir}
	dirs, err := f.dirs(arch)
	if err != nil {
		return "", err
	}
	return dirs.cached(pkg)
}

// FetchKernel is the package-level FetchKernel with the Fetcher's options.
func (f *Fetcher) FetchKernel(ctx context.Context, pkg, arch string) (string, error) {
	if err := checkName("package", pkg); err != nil {
		return "", err
	}
	if err := checkName("architecture", arch); err != nil {
		return "", err
	}
	d, err := f.dirs(arch)
	if err != nil {
		return "", err
	}
	if !f.Refresh {
		if deb, err := d.cached(pkg); err == nil {
			return deb, nil
		}
	}
	deb, err := f.get(ctx, d, pkg, func(dir string) (string, error) { return f.download(ctx, d, pkg, dir) })
	if err != nil {
		return "", err
	}
	// Remember which file the (meta)package name resolved to, so later runs
	// need no network at all.
	if err := writeFileAtomic(d.pointer(pkg), func(w *os.File) error {
		_, err := fmt.Fprintln(w, filepath.Base(deb))
		return err
	}); err != nil {
		return "", err
	}
	return deb, nil
}

// get downloads a package into the cache with download (which leaves
// one .deb in the directory it is given), updating the package lists
// first when there are none, and once more to retry when lists from an
// earlier run name a version the archive has dropped.
func (f *Fetcher) get(ctx context.Context, d *aptDirs, pkg string, download func(dir string) (string, error)) (string, error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("fetching %s needs apt-get (a Debian or Ubuntu host): %w", pkg, err)
	}
	for _, p := range []string{d.lists, filepath.Join(d.lists, "partial"), filepath.Join(d.aptCache, "archives", "partial"), d.debs} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	}
	updated := false
	if f.Refresh || !d.haveLists() {
		if err := f.update(ctx, d); err != nil {
			return "", err
		}
		updated = true
	}
	tmp, err := os.MkdirTemp(d.debs, ".download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	got, err := download(tmp)
	if errors.Is(err, errPlaced) {
		return "", err
	}
	if err != nil && !updated {
		f.logf("%v; updating the package lists to retry", err)
		if uerr := f.update(ctx, d); uerr != nil {
			return "", uerr
		}
		got, err = download(tmp)
		if errors.Is(err, errPlaced) {
			return "", err
		}
	}
	if err != nil {
		return "", err
	}
	deb := filepath.Join(d.debs, filepath.Base(got))
	if err := os.Rename(got, deb); err != nil {
		return "", err
	}
	return deb, nil
}

// updateWaits are the pauses before the second and third apt-get update
// when one fails: a mirror caught mid-sync serves a Packages file whose size
// does not match its Release file ("Mirror sync in progress?"), and a fresh
// CI machine's first update failed that way once and succeeded a minute
// later. A variable so that tests need not wait.
var updateWaits = []time.Duration{10 * time.Second, 30 * time.Second}

// update runs apt-get update for d's architecture, retrying after
// updateWaits, and returns the last error when every try failed.
func (f *Fetcher) update(ctx context.Context, d *aptDirs) error {
	f.logf("apt-get update for %s", d.arch)
	_, err := d.apt(ctx, "apt-get", "update")
	for i, wait := range updateWaits {
		if err == nil {
			return nil
		}
		f.logf("%v; retrying in %v (try %d of %d)", err, wait, i+2, len(updateWaits)+1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		_, err = d.apt(ctx, "apt-get", "update")
	}
	return err
}

// FetchExact returns the cached .deb of package pkg at exactly version,
// from arch's package lists (an "all" package comes from any arch's),
// downloading it with apt-get when it is not cached: the way to get
// packages that must match a kernel package already fetched, such as its
// headers. A version the archive no longer has is an error that says so.
func (f *Fetcher) FetchExact(ctx context.Context, pkg, version, arch string) (string, error) {
	if err := checkName("package", pkg); err != nil {
		return "", err
	}
	if err := checkName("architecture", arch); err != nil {
		return "", err
	}
	if !debVersion.MatchString(version) {
		return "", fmt.Errorf("invalid Debian version %q", version)
	}
	d, err := f.dirs(arch)
	if err != nil {
		return "", err
	}
	cached := func() string {
		// apt-get download names files name_version_arch.deb, with an
		// epoch's colon escaped.
		m, _ := filepath.Glob(filepath.Join(d.debs, pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_*.deb"))
		if len(m) == 1 {
			return m[0]
		}
		return ""
	}
	if deb := cached(); deb != "" && !f.Refresh {
		return deb, nil
	}
	spec := pkg + ":" + arch + "=" + version
	return f.get(ctx, d, pkg, func(dir string) (string, error) {
		f.logf("apt-get download %s", spec)
		if _, err := d.aptIn(ctx, dir, "apt-get", "download", spec); err != nil {
			return "", &OldVersionError{Err: err}
		}
		got, err := filepath.Glob(filepath.Join(dir, "*.deb"))
		if err != nil || len(got) != 1 {
			return "", fmt.Errorf("apt-get download %s left %d .deb files, want 1", spec, len(got))
		}
		return got[0], nil
	})
}

var debVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~:-]*$`)

// ParseDebName splits the name apt-get download gives a package file,
// name_version_arch.deb, into its parts (an epoch's %3a unescaped).
func ParseDebName(file string) (name, version, arch string, ok bool) {
	base, found := strings.CutSuffix(filepath.Base(file), ".deb")
	parts := strings.Split(base, "_")
	if !found || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], strings.ReplaceAll(parts[1], "%3a", ":"), parts[2], true
}

// download resolves pkg and downloads it into dir, returning the .deb.
func (f *Fetcher) download(ctx context.Context, d *aptDirs, pkg, dir string) (string, error) {
	real, err := d.resolve(ctx, pkg)
	if err != nil {
		return "", err
	}
	f.logf("apt-get download %s (%s)", real, d.arch)
	if _, err := d.aptIn(ctx, dir, "apt-get", "download", real+":"+d.arch); err != nil {
		return "", err
	}
	got, err := filepath.Glob(filepath.Join(dir, "*.deb"))
	if err != nil || len(got) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d .deb files, want 1", real, len(got))
	}
	return got[0], nil
}

func (f *Fetcher) logf(format string, args ...any) {
	if f.Log != nil {
		f.Log(format, args...)
	}
}

var safeName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.\-]*$`)

// checkName keeps package and architecture names to Debian's alphabet: they
// become file names and apt-get arguments.
func checkName(what, s string) error {
	if !safeName.MatchString(s) {
		return fmt.Errorf("invalid Debian %s name %q", what, s)
	}
	return nil
}

type aptDirs struct {
	arch     string
	lists    string // private Dir::State::Lists
	aptCache string // private Dir::Cache (pkgcache.bin, archives)
	debs     string // downloaded packages
}

func (f *Fetcher) dirs(arch string) (*aptDirs, error) {
	root := f.CacheDir
	if root == "" {
		var err error
		if root, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	base := filepath.Join(root, "debian", arch)
	return &aptDirs{
		arch:     arch,
		lists:    filepath.Join(base, "lists"),
		aptCache: filepath.Join(base, "apt-cache"),
		debs:     filepath.Join(base, "debs"),
	}, nil
}

func (d *aptDirs) pointer(pkg string) string { return filepath.Join(d.debs, pkg+".fetched") }

func (d *aptDirs) cached(pkg string) (string, error) {
	b, err := os.ReadFile(d.pointer(pkg))
	if err != nil {
		return "", fmt.Errorf("%s (%s): %w", pkg, d.arch, ErrNotCached)
	}
	deb := filepath.Join(d.debs, filepath.Base(strings.TrimSpace(string(b))))
	if _, err := os.Stat(deb); err != nil {
		return "", fmt.Errorf("%s (%s): %w: %v", pkg, d.arch, ErrNotCached, err)
	}
	return deb, nil
}

func (d *aptDirs) haveLists() bool {
	m, _ := filepath.Glob(filepath.Join(d.lists, "*_Packages*"))
	return len(m) > 0
}

// options make apt treat arch as the native architecture and keep all of
// its state in the cache: no root, and the host's apt state is untouched.
func (d *aptDirs) options() []string {
	opts := []string{
		"-oAPT::Architecture=" + d.arch,
		"-oAPT::Architectures::=" + d.arch,
		"-oDir::State::Lists=" + d.lists,
		"-oDir::Cache=" + d.aptCache,
		"-oDir::State::status=/dev/null",
		"-oDebug::NoLocking=1",
		// Only package indexes: no translations or AppStream metadata.
		"-oAcquire::Languages=none",
		"-oAcquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"-oAcquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
		"-oAcquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
		"-oAcquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false",
	}
	if os.Geteuid() == 0 {
		// The _apt sandbox user cannot write into a root-owned private cache.
		opts = append(opts, "-oAPT::Sandbox::User=root")
	}
	return opts
}

func (d *aptDirs) apt(ctx context.Context, tool string, args ...string) (string, error) {
	return d.aptIn(ctx, "", tool, args...)
}

func (d *aptDirs) aptIn(ctx context.Context, dir, tool string, args ...string) (string, error) {
	full := append(d.options(), args...)
	cmd := exec.CommandContext(ctx, tool, full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, lastLines(errb.String()+out.String(), 8))
	}
	return out.String(), nil
}

// resolve follows a kernel metapackage to the package that holds the
// kernel: linux-image-686 depends on linux-image-6.1.0-57-686.
func (d *aptDirs) resolve(ctx context.Context, pkg string) (string, error) {
	cur := pkg
	for range 4 {
		out, err := d.apt(ctx, "apt-cache", "depends", cur)
		if err != nil {
			return "", err
		}
		next := kernelDependency(cur, out)
		if next == "" {
			return cur, nil
		}
		cur = next
	}
	return "", fmt.Errorf("%s: metapackage chain too long (stopped at %s)", pkg, cur)
}

// kernelDependency picks the linux-image dependency from apt-cache depends
// output, or "" when pkg holds the kernel itself.
func kernelDependency(pkg, out string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "|"))
		dep, ok := strings.CutPrefix(line, "Depends: ")
		if !ok {
			continue
		}
		dep = strings.Trim(strings.TrimSpace(dep), "<>")
		dep, _, _ = strings.Cut(dep, ":") // strip ":i386"
		if dep != pkg && strings.HasPrefix(dep, "linux-image-") && safeName.MatchString(dep) {
			return dep
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// OldVersionError is a package version the archive no longer has: it
// keeps only current versions, so the cached package and lists must be
// refreshed (Fetcher.Refresh) to match.
type OldVersionError struct{ Err error }

func (e *OldVersionError) Error() string { return e.Worded("with Fetcher.Refresh") }

// Worded is the message with the way to refresh named by the caller.
func (e *OldVersionError) Worded(refresh string) string {
	return fmt.Sprintf("%v (the archive keeps only current versions: refresh the kernel package, e.g. %s, to match)", e.Err, refresh)
}

func (e *OldVersionError) Unwrap() error { return e.Err }

// FetchPackages returns the cached .debs of packages pkgs for arch, in
// the order given, downloading the ones not cached with one apt-get
// download (no dependencies are added: the caller names them all). Each
// name is remembered as resolved to its file, so later runs need no
// network; Refresh downloads them all again.
func (f *Fetcher) FetchPackages(ctx context.Context, arch string, pkgs []string) ([]string, error) {
	if err := checkName("architecture", arch); err != nil {
		return nil, err
	}
	d, err := f.dirs(arch)
	if err != nil {
		return nil, err
	}
	debs := make([]string, len(pkgs))
	var missing []string
	for i, p := range pkgs {
		if err := checkName("package", p); err != nil {
			return nil, err
		}
		if !f.Refresh {
			if deb, err := d.cached(p); err == nil {
				debs[i] = deb
				continue
			}
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return debs, nil
	}
	_, err = f.get(ctx, d, missing[0], func(dir string) (string, error) {
		specs := make([]string, len(missing))
		for i, p := range missing {
			specs[i] = p + ":" + arch
		}
		f.logf("apt-get download %s", strings.Join(specs, " "))
		if _, err := d.aptIn(ctx, dir, "apt-get", append([]string{"download"}, specs...)...); err != nil {
			return "", err
		}
		got, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
		byName := map[string]string{}
		for _, g := range got {
			if name, _, _, ok := ParseDebName(g); ok {
				byName[name] = g
			}
		}
		for _, p := range missing {
			g, ok := byName[p]
			if !ok {
				return "", fmt.Errorf("apt-get download left no .deb for %s in %s", p, dir)
			}
			deb := filepath.Join(d.debs, filepath.Base(g))
			if err := os.Rename(g, deb); err != nil {
				return "", err
			}
			if err := writeFileAtomic(d.pointer(p), func(w *os.File) error {
				_, err := fmt.Fprintln(w, filepath.Base(deb))
				return err
			}); err != nil {
				return "", err
			}
		}
		// get moves the one file it is given; the rest are in place.
		return "", errPlaced
	})
	if err != nil && !errors.Is(err, errPlaced) {
		return nil, err
	}
	for i, p := range pkgs {
		if debs[i] == "" {
			if debs[i], err = d.cached(p); err != nil {
				return nil, err
			}
		}
	}
	return debs, nil
}

// errPlaced tells get that the download put its files in place itself.
var errPlaced = errors.New("packages placed")
