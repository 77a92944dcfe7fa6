package boot

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/u-root/u-root/pkg/kmodule"
	"golang.org/x/sys/unix"
)

// mountKernelFS mounts proc, sysfs and devtmpfs where they are not yet
// (u-root's init mounts them too; the sequence does not rely on it).
func mountKernelFS(cfg *Config) error {
	var errs []error
	for _, m := range []struct{ src, dir, fstype string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
	} {
		dir := cfg.path(m.dir)
		if mounted(cfg.path("/proc/self/mountinfo"), dir) {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := unix.Mount(m.src, dir, m.fstype, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mount %s on %s: %w", m.fstype, dir, err))
		}
	}
	return errors.Join(errs...)
}

func mounted(mountinfo, dir string) bool {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// kmoduleLoader loads modules with u-root's kmodule, dependencies from
// the initramfs's modules.dep.
type kmoduleLoader struct{ p *kmodule.Prober }

func newKmoduleLoader(root string) (*kmoduleLoader, error) {
	opts := kmodule.ProbeOpts{}
	if root != "" && root != "/" {
		opts.RootDir = root
	}
	p, err := kmodule.NewProber(opts)
	if err != nil {
		return nil, err
	}
	return &kmoduleLoader{p: p}, nil
}

func (l *kmoduleLoader) Load(name, params string) error {
	err := l.p.Probe(name, params)
	if err != nil && strings.Contains(err.Error(), "could not find module path") {
		return fmt.Errorf("%w: %v", ErrModuleNotFound, err)
	}
	return err
}

// ReleaseConsole gives up the controlling terminal when this process leads
// its session, as u-root's init makes uinit do. Otherwise the kernel hangs
// up the console when uinit exits — discarding output not yet sent and
// handing the shell that init starts next a dead terminal, so it exits and
// init with it. Dropping the terminal sends our process group SIGHUP,
// hence the ignore first.
func ReleaseConsole() error {
	if sid, err := unix.Getsid(0); err != nil || sid != unix.Getpid() {
		return nil // not a session leader: nothing is hung up at exit
	}
	signal.Ignore(unix.SIGHUP)
	if err := unix.IoctlSetInt(0, unix.TIOCNOTTY, 0); err != nil && !errors.Is(err, unix.ENOTTY) {
		return fmt.Errorf("releasing the console (TIOCNOTTY): %w", err)
	}
	return nil
}
