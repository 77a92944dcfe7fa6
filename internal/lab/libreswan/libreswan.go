// Package libreswan is the router's second real IKEv2 peer (issue 28):
// Libreswan 4.10 from Debian bookworm, pluto unmodified, run in the
// world VM beside or instead of strongSwan (package strongswan), because
// the host's kernel has no usable ESP.
//
// Fetch downloads Debian's i386 packages with apt-get into the ocfw
// cache and unpacks them into a tree (worldvm.FetchTree) that
// worldvm's Config.Trees puts at the guest's /. An Instance is one
// pluto with its own ipsec.conf, ipsec.secrets, NSS database and
// control socket, so several can run side by side in one guest, each in
// its own network namespace. The guest has no shell: the instance runs
// pluto, addconn and whack directly (what the `ipsec` script would).
//
// Test-only: nothing here reaches a router image.
package libreswan

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/lab/strongswan"
	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// Packages are the Debian packages of the peer, dependencies included
// (apt-cache depends, without those a tree run by the world's agent has
// no use for: debconf, iptables, dns-root-data, host): pluto, whack and
// addconn, certutil for pluto's NSS database (libnss3-tools), NSS's
// softokn with its sqlite database, and iproute2 for `ip xfrm`.
var Packages = []string{
	"libreswan", "libnss3-tools", "libnss3", "libnspr4", "libsqlite3-0",
	"libc6", "libgcc-s1", "libcrypt1", "libpam0g", "libselinux1", "libpcre2-8-0", "libsystemd0",
	"libcap2", "libgcrypt20", "libgpg-error0", "liblz4-1", "liblzma5", "libzstd1",
	"libcurl3-nss", "libcap-ng0", "libunbound8", "libldns3", "libaudit1", "libaudit-common",
	"libevent-core-2.1-7", "libevent-pthreads-2.1-7", "libevent-2.1-7",
	"libldap-2.5-0", "libsasl2-2", "libsasl2-modules-db", "libdb5.3",
	"libgnutls30", "libhogweed6", "libnettle8", "libgmp10", "libidn2-0", "libunistring2",
	"libp11-kit0", "libffi8", "libtasn1-6", "libssl3",
	"libnghttp2-14", "libpsl5", "librtmp1", "libssh2-1", "libbrotli1", "zlib1g",
	"libgssapi-krb5-2", "libkrb5-3", "libk5crypto3", "libkrb5support0", "libcom-err2", "libkeyutils1",
	"libhiredis0.14", "libprotobuf-c1",
	"iproute2", "libbpf1", "libbsd0", "libmd0", "libelf1", "libmnl0", "libtirpc3", "libxtables12",
}

// Guest paths of the programs, as Debian installs them.
const (
	Pluto    = "/usr/libexec/ipsec/pluto"
	Whack    = "/usr/libexec/ipsec/whack"
	Addconn  = "/usr/libexec/ipsec/addconn"
	Certutil = "/usr/bin/certutil"
	IP       = "/bin/ip"
)

// LibraryPath is the tree's library directories, for LD_LIBRARY_PATH:
// the guest has no ld.so.cache.
const LibraryPath = strongswan.LibraryPath

// Spec is the tree's recipe for worldvm.FetchTree.
var Spec = worldvm.TreeSpec{
	Name: "libreswan", Packages: Packages, Keep: keep, LibraryPath: LibraryPath,
	Required: []string{Pluto, Whack, Addconn, Certutil, IP, "/lib/ld-linux.so.2",
		"/usr/lib/i386-linux-gnu/libsoftokn3.so", "/usr/lib/i386-linux-gnu/libfreebl3.so"},
}

// Fetch returns the tree of Packages for i386 under cacheDir ("" means
// the default ocfw cache); see worldvm.FetchTree.
func Fetch(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (*worldvm.Tree, error) {
	return worldvm.FetchTree(ctx, cacheDir, Spec, logf)
}

// keep leaves out what the guest never reads, as strongswan's does, and
// the ipsec helper scripts' symlinks that point outside the tree.
func keep(name string) bool {
	for _, p := range []string{"sbin/ip", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian",
		"usr/share/bash-completion", "usr/share/zsh", "lib/systemd", "usr/lib/systemd", "etc/init.d",
		"usr/lib/i386-linux-gnu/gconv", "usr/lib/i386-linux-gnu/perl", "usr/lib/i386-linux-gnu/tc",
		"usr/lib/i386-linux-gnu/sasl2", "etc/ipsec.d/policies"} {
		if name == p || strings.HasPrefix(name, p+"/") {
			return false
		}
	}
	return true
}

// Instance is one pluto in the world VM.
type Instance struct {
	// Name tells instances apart: their files are under /etc/lsw/NAME
	// and the agent knows the pluto as pluto-NAME.
	Name string
	// NS is the world's network namespace the pluto runs in.
	NS string
	// Run numbers the pluto's starts: each has a run directory of its
	// own (pid file, control socket), since a killed pluto leaves its
	// pid file behind and the guest has no rm.
	Run int
}

// Dir is the instance's directory in the guest.
func (i Instance) Dir() string { return "/etc/lsw/" + i.Name }

// Conf is the guest path of its ipsec.conf.
func (i Instance) Conf() string { return i.Dir() + "/ipsec.conf" }

// Secrets is the guest path of its ipsec.secrets.
func (i Instance) Secrets() string { return i.Dir() + "/ipsec.secrets" }

// NSSDir is its NSS database: the instance's directory, which its
// files made (the agent has no mkdir).
func (i Instance) NSSDir() string { return i.Dir() }

// RunDir is the run directory of this start.
func (i Instance) RunDir() string { return fmt.Sprintf("%s/run%d", i.Dir(), i.Run) }

// Ctl is its control socket.
func (i Instance) Ctl() string { return i.RunDir() + "/pluto.ctl" }

// Files are the instance's files for worldvm.Config.Files: the given
// ipsec.conf and ipsec.secrets.
func (i Instance) Files(conf, secrets []byte) map[string][]byte {
	return map[string][]byte{i.Conf(): conf, i.Secrets(): secrets}
}

func env() string { return "LD_LIBRARY_PATH=" + LibraryPath }

// Start makes the instance's NSS database and starts its pluto (Run 0).
func (i Instance) Start(ctx context.Context, w *worldvm.World) error {
	if out, err := w.Do(ctx, fmt.Sprintf("exec %s %s %s -N -d sql:%s --empty-password", i.NS, env(), Certutil, i.NSSDir())); err != nil {
		return fmt.Errorf("libreswan: %s: certutil: %v: %s", i.Name, err, out)
	}
	return i.runPluto(ctx, w)
}

// Restart starts the instance's pluto again after it was stopped (or
// killed), in a new run directory; use the Instance it returns.
func (i Instance) Restart(ctx context.Context, w *worldvm.World) (Instance, error) {
	i.Run++
	return i, i.runPluto(ctx, w)
}

// runPluto starts pluto in its namespace with this Run's directory, waits
// until whack gets an answer and then has it listen (`ipsec auto
// --ready`): a pluto that answers has not always found its interfaces
// yet, and refused an --initiate ("need --listen before --initiate")
// under load.
func (i Instance) runPluto(ctx context.Context, w *worldvm.World) error {
	if _, err := w.Do(ctx, "write "+i.RunDir()+"/.made "+worldvm.Quote("run directory")); err != nil {
		return err
	}
	// --nofork --stderrlog: the agent keeps the log.
	if _, err := w.Do(ctx, fmt.Sprintf("start %s pluto-%s %s %s --nofork --stderrlog --config %s --secretsfile %s --nssdir %s --rundir %s",
		i.NS, i.Name, env(), Pluto, i.Conf(), i.Secrets(), i.NSSDir(), i.RunDir())); err != nil {
		return err
	}
	var last error
	for range 100 {
		if _, last = w.Do(ctx, i.WhackCommand("--status")); last == nil {
			if out, err := w.Do(ctx, i.WhackCommand("--listen")); err != nil {
				return fmt.Errorf("libreswan: pluto %s: whack --listen: %v: %s", i.Name, err, out)
			}
			return nil
		}
		if out, err := w.Do(ctx, "output pluto-"+i.Name); err == nil && !strings.Contains(strings.SplitN(out, "\n", 2)[0], "running") {
			return fmt.Errorf("libreswan: pluto %s exited: %s", i.Name, out)
		}
		if err := sleep(ctx, 200); err != nil {
			return err
		}
	}
	return fmt.Errorf("libreswan: pluto %s's control socket does not answer: %v", i.Name, last)
}

// WhackCommand is the agent's command line that runs whack with args
// against this pluto.
func (i Instance) WhackCommand(args ...string) string {
	return fmt.Sprintf("exec %s %s %s --ctlsocket %s %s", i.NS, env(), Whack, i.Ctl(), strings.Join(quoteAll(args), " "))
}

// AddconnCommand is the agent's command line that loads conn name from
// the instance's ipsec.conf into its pluto (`ipsec auto --add name`).
func (i Instance) AddconnCommand(name string) string {
	return fmt.Sprintf("exec %s %s %s --config %s --ctlsocket %s %s", i.NS, env(), Addconn, i.Conf(), i.Ctl(), worldvm.Quote(name))
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = worldvm.Quote(a)
	}
	return out
}

func sleep(ctx context.Context, ms int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return nil
	}
}
