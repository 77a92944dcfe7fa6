package firmware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/ocfw/ocfw/plan"
)

// hostTool is a program (or file) from a Debian package that image
// building runs.
type hostTool struct {
	Name    string // program name, or an absolute path for data files
	Package string // Debian package that provides it
	Version []string
}

// The host tools a bios-cf build needs. FAT file systems are made with
// dosfstools and filled with mtools rather than go-diskfs: SYSLINUX's
// installer needs mtools anyway, and go-diskfs v1.9.4 (the newest served)
// writes FAT16 with an unused cluster, hidden sectors 0 and a FAT32 `..`
// that fsck.fat rejects; mkfs.fat --invariant with a fixed volume id and
// mtools under SOURCE_DATE_EPOCH give byte-identical file systems.
var (
	toolMkfsFat  = hostTool{Name: "mkfs.fat", Package: "dosfstools"}
	toolMcopy    = hostTool{Name: "mcopy", Package: "mtools", Version: []string{"--version"}}
	toolMmd      = hostTool{Name: "mmd", Package: "mtools"}
	toolSyslinux = hostTool{Name: "syslinux", Package: "syslinux", Version: []string{"--version"}}
	fileMBRBin   = hostTool{Name: "/usr/lib/syslinux/mbr/mbr.bin", Package: "syslinux-common"}
)

// ErrMissingTool marks a host tool that is not installed.
var ErrMissingTool = errors.New("host tool missing")

func (t hostTool) path() (string, error) {
	if strings.HasPrefix(t.Name, "/") {
		if _, err := os.Stat(t.Name); err != nil {
			return "", fmt.Errorf("%w: %s not found (apt-get install %s)", ErrMissingTool, t.Name, t.Package)
		}
		return t.Name, nil
	}
	p, err := exec.LookPath(t.Name)
	if err != nil {
		// mkfs.fat lives in /usr/sbin, which a non-root PATH may lack.
		for _, d := range []string{"/usr/sbin", "/sbin"} {
			if _, err := os.Stat(d + "/" + t.Name); err == nil {
				return d + "/" + t.Name, nil
			}
		}
		return "", fmt.Errorf("%w: %s not found (apt-get install %s)", ErrMissingTool, t.Name, t.Package)
	}
	return p, nil
}

// version returns the tool's package and version, for the manifest: the
// image bytes depend on these tools' versions.
func (t hostTool) version(ctx context.Context) string {
	if out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Package} ${Version}", t.Package).Output(); err == nil && len(out) > 0 {
		return string(out)
	}
	p, err := t.path()
	if err != nil || t.Version == nil {
		return ""
	}
	out, _ := exec.CommandContext(ctx, p, t.Version...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// CheckTools reports the first missing host tool for a boot method, naming
// its Debian package.
func CheckTools(boot string) error {
	if boot != plan.BootBIOSCF && boot != plan.BootRedBoot && boot != plan.BootQEMUARM {
		return fmt.Errorf("unknown boot method %q", boot)
	}
	tools := []hostTool{toolMkfsFat, toolMcopy, toolMmd}
	if boot == plan.BootBIOSCF {
		tools = append(tools, toolSyslinux, fileMBRBin)
	}
	for _, t := range tools {
		if _, err := t.path(); err != nil {
			return err
		}
	}
	return nil
}

// runner runs host tools with a fixed environment: SOURCE_DATE_EPOCH for
// the timestamps mtools writes, and no user mtools configuration.
type runner struct {
	ctx context.Context
	sde int64
}

func (r runner) run(t hostTool, args ...string) error {
	p, err := t.path()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(r.ctx, p, args...)
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("SOURCE_DATE_EPOCH=%d", r.sde),
		"MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null", "TZ=UTC", "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", t.Name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
