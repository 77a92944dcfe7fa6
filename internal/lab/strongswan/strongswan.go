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
	"fmt"
	"strings"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
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
type Root = worldvm.Tree

// Spec is the tree's recipe for worldvm.FetchTree.
var Spec = worldvm.TreeSpec{
	Name: "strongswan", Packages: Packages, Keep: keep, LibraryPath: LibraryPath,
	Required: []string{Charon, Swanctl, IP, "/lib/ld-linux.so.2", "/lib/i386-linux-gnu/libgcc_s.so.1"},
}

// Fetch returns the tree of Packages for i386 under cacheDir ("" means
// the default ocfw cache), downloading the packages with apt-get the
// first time and unpacking them the first time this set of files is
// seen: later runs need no network and no unpacking. logf, if not nil,
// hears what is downloaded.
func Fetch(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (*Root, error) {
	return worldvm.FetchTree(ctx, cacheDir, Spec, logf)
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

// CheckLibraries checks the tree at root against Spec (worldvm.CheckTree).
func CheckLibraries(root string) error { return worldvm.CheckTree(root, Spec) }

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
