// Package strongswan is the real IKEv2 peer of the router's tests
// (issue 21): strongSwan 5.9.8 from Debian bookworm, charon and
// swanctl unmodified, run in the world VM (package worldvm), because
// the host's kernel has no usable ESP.
//
// Fetch downloads Debian's i386 packages with apt-get (the machine's
// apt sources, private package lists in the ocfw cache, as for the
// kernel packages) and unpacks them into a root tree; worldvm's
// Config.Trees puts the tree at the guest's /, where the programs run
// with the tree's own /lib/ld-linux.so.2 and libraries. An Instance is
// one charon with its own strongswan.conf, vici socket and
// swanctl.conf, so several can run side by side in one guest (each in
// its own network namespace; the agent's start gives each a private
// /run for charon's fixed pid file).
//
// Test-only: nothing here reaches a router image.
package strongswan

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// Packages are the Debian packages of the peer, dependencies included
// (apt-cache depends, without the ones a tree run by the world's agent
// has no use for: debconf, strongswan-starter, perl, adduser): charon
// and its plugins (strongswan-libcharon has kernel-netlink,
// socket-default and vici; libstrongswan-standard-plugins openssl),
// swanctl, and iproute2 for `ip xfrm` (manual keys, inspecting SAs).
// libgcc-s1 is no DT_NEEDED of anything: glibc loads libgcc_s.so.1
// when a thread is cancelled, which swanctl's and charon's threads are.
var Packages = []string{
	"strongswan-charon", "strongswan-libcharon", "strongswan-swanctl",
	"libstrongswan", "libstrongswan-standard-plugins",
	"libc6", "libgcc-s1", "libcap2", "libgmp10", "libssl3", "libip4tc2",
	"libsystemd0", "libgcrypt20", "libgpg-error0", "liblz4-1", "liblzma5", "libzstd1",
	"iproute2", "libbpf1", "libbsd0", "libmd0", "libdb5.3", "libelf1", "zlib1g", "libmnl0",
	"libselinux1", "libpcre2-8-0", "libtirpc3", "libgssapi-krb5-2", "libkrb5-3",
	"libk5crypto3", "libkrb5support0", "libcom-err2", "libkeyutils1", "libxtables12",
}

// Guest paths of the programs, as Debian installs them.
const (
	Charon  = "/usr/lib/ipsec/charon"
	Swanctl = "/usr/sbin/swanctl"
	IP      = "/bin/ip"
)

// LibraryPath is the tree's library directories, for LD_LIBRARY_PATH:
// the guest has no ld.so.cache.
const LibraryPath = "/lib/i386-linux-gnu:/usr/lib/i386-linux-gnu"

// Root is an unpacked tree.
type Root struct {
	Dir  string   // the tree, for worldvm.Config.Trees
	Debs []string // the packages' file names (name_version_arch.deb)
}

// Fetch returns the tree of Packages for i386 under cacheDir ("" means
// the default ocfw cache), downloading the packages with apt-get the
// first time and unpacking them the first time this set of files is
// seen: later runs need no network and no unpacking. logf, if not nil,
// hears what is downloaded.
func Fetch(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (*Root, error) {
	if cacheDir == "" {
		var err error
		if cacheDir, err = debian.DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	f := &debian.Fetcher{CacheDir: cacheDir, Log: logf}
	debs, err := f.FetchPackages(ctx, "i386", Packages)
	if err != nil {
		return nil, fmt.Errorf("strongswan: fetching the i386 packages: %w", err)
	}
	r := &Root{}
	h := sha256.New()
	for _, d := range debs {
		r.Debs = append(r.Debs, filepath.Base(d))
		fmt.Fprintln(h, filepath.Base(d))
	}
	// One tree per set of package files: a refresh that brings new
	// versions unpacks a new tree.
	base := filepath.Join(cacheDir, "strongswan", "i386")
	r.Dir = filepath.Join(base, "root-"+hex.EncodeToString(h.Sum(nil))[:16])
	err = placeTree(r.Dir, func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(Charon, "/")))
		return err == nil
	}, func(tmp string) error {
		for _, d := range debs {
			if _, err := debian.Extract(d, tmp, keep); err != nil {
				return fmt.Errorf("strongswan: unpacking: %w", err)
			}
		}
		return CheckLibraries(tmp)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// placeTree makes the directory dir once, among any number of
// processes doing the same at the same time (go test runs the packages
// that use the tree side by side, and on a fresh machine all of them
// find the cache empty): fill writes the tree into a temporary
// directory beside dir, which is renamed to dir whole, so a dir that
// exists is complete. A lock file beside dir (dir.lock, flock) lets one
// process unpack while the others wait and then find the tree; the
// rename's "already there" is success too, for whatever the lock
// cannot see (a cache on a file system without flock).
func placeTree(dir string, complete func(dir string) bool, fill func(tmp string) error) error {
	if complete(dir) {
		return nil
	}
	base := filepath.Dir(dir)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if complete(dir) {
		return nil // another process unpacked it while we waited
	}
	tmp, err := os.MkdirTemp(base, ".unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if complete(dir) {
			return nil
		}
		return fmt.Errorf("strongswan: placing the unpacked tree: %w", err)
	}
	return nil
}

// lockFile takes an exclusive flock on name, waiting for other
// processes, and returns how to release it. The file stays for the
// next run.
func lockFile(name string) (func(), error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("strongswan: locking %s: %w", name, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// keep leaves out what the guest never reads (documentation, manual
// pages, translations, systemd units): the initramfs stays smaller; and
// sbin/ip, an absolute symlink to /bin/ip, which debian.Extract refuses;
// tc's plugins (q_atm needs libatm, which nothing here uses).
func keep(name string) bool {
	for _, p := range []string{"sbin/ip", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian",
		"usr/share/bash-completion", "usr/share/zsh", "lib/systemd", "usr/lib/systemd", "etc/init.d",
		"usr/lib/i386-linux-gnu/gconv", "usr/lib/i386-linux-gnu/perl",
		"usr/lib/i386-linux-gnu/tc"} {
		if name == p || strings.HasPrefix(name, p+"/") {
			return false
		}
	}
	return true
}

// CheckLibraries checks that every shared library the tree's programs
// and libraries need is in the tree (in a library directory or their
// RUNPATH): a package missing from Packages shows here, on the host,
// by name, rather than as a program that does not start in the guest.
func CheckLibraries(root string) error {
	have := map[string]bool{}
	type need struct{ file, lib string }
	var needs []need
	var runpaths = map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = "/" + filepath.ToSlash(rel)
		have[rel] = true
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not an ELF file
		}
		defer f.Close()
		libs, _ := f.ImportedLibraries()
		rp, _ := f.DynString(elf.DT_RUNPATH)
		rp2, _ := f.DynString(elf.DT_RPATH)
		for _, s := range append(rp, rp2...) {
			runpaths[rel] = append(runpaths[rel], strings.Split(s, ":")...)
		}
		for _, l := range libs {
			needs = append(needs, need{rel, l})
		}
		return nil
	})
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range needs {
		dirs := append(strings.Split(LibraryPath, ":"), runpaths[n.file]...)
		found := false
		for _, d := range dirs {
			if have[path.Join(d, n.lib)] {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s needs %s", n.file, n.lib))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("strongswan: the tree %s lacks libraries (add their packages to Packages): %s", root, strings.Join(missing, "; "))
	}
	for _, p := range []string{Charon, Swanctl, IP, "/lib/ld-linux.so.2", "/lib/i386-linux-gnu/libgcc_s.so.1"} {
		if !have[p] {
			return fmt.Errorf("strongswan: the tree %s has no %s: is Packages complete?", root, p)
		}
	}
	return nil
}

// Modules are the kernel modules the world VM needs for charon's SAs:
// the router's own (catalog.TunnelModules, in their load order; AES is
// built into Debian's 686 kernel) and veth for namespaces joined inside
// the world.
func Modules() []string { return append(catalog.TunnelModuleNames(), "veth") }

// Instance is one charon in the world VM.
type Instance struct {
	// Name tells instances apart: their files are under /etc/swan/NAME
	// and the agent knows the charon as charon-NAME.
	Name string
	// NS is the world's network namespace the charon runs in.
	NS string
}

// Dir is the instance's directory in the guest.
func (i Instance) Dir() string { return "/etc/swan/" + i.Name }

// Conf is the guest path of its strongswan.conf.
func (i Instance) Conf() string { return i.Dir() + "/strongswan.conf" }

// SwanctlConf is the guest path of its swanctl.conf.
func (i Instance) SwanctlConf() string { return i.Dir() + "/swanctl.conf" }

// Socket is its vici socket.
func (i Instance) Socket() string { return "unix://" + i.Dir() + "/charon.vici" }

// StrongswanConf is the instance's strongswan.conf: only the plugins
// the tests use, loaded by name (no modular plugin configs; swanctl's
// default list has aesni, which dies of SIGILL on the guest's Pentium
// II; kdf is needed since 5.9.8 for the IKE keys: OpenSSL 3.0's plugin
// does not offer prf+); the log on
// stderr, which the agent keeps (worldvm's output command); the vici
// socket in the instance's directory, where swanctl finds it too.
func (i Instance) StrongswanConf() string {
	return fmt.Sprintf(`charon {
	load = random nonce openssl aes sha1 sha2 hmac kdf gmp kernel-netlink socket-default vici
	install_virtual_ip = no
	filelog {
		stderr {
			default = 1
			time_format = %%s
		}
	}
	plugins {
		vici {
			socket = %s
		}
	}
}
swanctl {
	load = random openssl pem pkcs1 pkcs8 x509 pubkey
	socket = %s
}
`, i.Socket(), i.Socket())
}

// Files are the instance's files for worldvm.Config.Files: its
// strongswan.conf and the given swanctl.conf.
func (i Instance) Files(swanctlConf []byte) map[string][]byte {
	return map[string][]byte{i.Conf(): []byte(i.StrongswanConf()), i.SwanctlConf(): swanctlConf}
}

func (i Instance) env() string {
	return "STRONGSWAN_CONF=" + i.Conf() + " LD_LIBRARY_PATH=" + LibraryPath
}

// StartCommand is the world agent's command line that starts the
// charon in its namespace.
func (i Instance) StartCommand() string {
	return fmt.Sprintf("start %s charon-%s %s %s", i.NS, i.Name, i.env(), Charon)
}

// SwanctlCommand is the agent's command line that runs swanctl with
// args against this charon (e.g. "--load-all"; the instance's
// swanctl.conf is given with --file for the load commands).
func (i Instance) SwanctlCommand(args ...string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "--load") {
			args = append(args, "--file", i.SwanctlConf())
			break
		}
	}
	return fmt.Sprintf("exec %s %s %s %s", i.NS, i.env(), Swanctl, strings.Join(quoteAll(args), " "))
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = worldvm.Quote(a)
	}
	return out
}

// Start starts the charon in world w and waits until its vici socket
// answers.
func (i Instance) Start(ctx context.Context, w *worldvm.World) error {
	if _, err := w.Do(ctx, i.StartCommand()); err != nil {
		return err
	}
	var last error
	for range 50 {
		if _, last = w.Do(ctx, i.SwanctlCommand("--stats")); last == nil {
			return nil
		}
		if out, err := w.Do(ctx, "output charon-"+i.Name); err == nil && !strings.Contains(strings.SplitN(out, "\n", 2)[0], "running") {
			return fmt.Errorf("strongswan: charon %s exited: %s", i.Name, out)
		}
		if err := sleep(ctx, 200); err != nil {
			return err
		}
	}
	return fmt.Errorf("strongswan: charon %s's vici socket does not answer: %v", i.Name, last)
}

func sleep(ctx context.Context, ms int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return nil
	}
}
