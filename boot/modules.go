package boot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/plan"
)

// ModuleLoader loads one kernel module and its dependencies; params
// ("delay_us=2000 corrupt_min=0", "" for none) go to the module itself.
type ModuleLoader interface {
	Load(name, params string) error
}

// ErrModuleNotFound marks a module the initramfs does not have: not
// fatal, the engines it drives are reported absent.
var ErrModuleNotFound = errors.New("not in this kernel's modules")

// Module load outcomes.
const (
	ModLoaded   = "loaded"
	ModBuiltin  = "built in"
	ModMissing  = "missing"
	ModFailed   = "failed"
	ModOptional = "not in this kernel (optional)"
	// ModNoDevice: the driver of a device this machine may not have
	// (plan.Module.IfDevice) found none; the module is not kept.
	ModNoDevice = "no such device here"
)

// ModuleResult is what happened to one module.
type ModuleResult struct {
	Name   string
	Status string
	Err    string
	For    string
	// Params were given to the module from the kernel command line.
	Params string
}

// ModuleResults are a boot's module outcomes, in load order.
type ModuleResults []ModuleResult

// Lines renders the results for the console, one per module.
func (rs ModuleResults) Lines() []string {
	var out []string
	for _, r := range rs {
		l := fmt.Sprintf("%-16s %s", r.Name, r.Status)
		if r.Params != "" {
			l += " with " + r.Params + " (kernel command line)"
		}
		if r.Err != "" {
			l += ": " + r.Err
		}
		out = append(out, l)
	}
	return out
}

// Notes are the report notes for modules that did not load.
func (rs ModuleResults) Notes() []string {
	var out []string
	for _, r := range rs {
		switch r.Status {
		case ModMissing, ModFailed:
			n := fmt.Sprintf("kernel module %s %s", r.Name, r.Status)
			if r.For != "" {
				n += " (" + r.For + ")"
			}
			if r.Err != "" {
				n += ": " + r.Err
			}
			out = append(out, n)
		}
	}
	return out
}

// loadModules loads names in order. With a plan, the names are the plan's
// modules (a missing one is reported); without, they are optional storage
// modules.
func loadModules(cfg *Config, names []string, pl *plan.Plan) ModuleResults {
	builtin := builtinModules(cfg)
	loader := cfg.Loader
	if loader == nil {
		l, err := newKmoduleLoader(cfg.Root)
		if err != nil {
			// No modules.dep: a kernel with everything built in, or none
			// of the modules the build wanted.
			loader = noModules{err}
		} else {
			loader = l
		}
	}
	why := map[string]string{}
	optional, ifDevice := map[string]bool{}, map[string]bool{}
	if pl != nil {
		for _, m := range pl.Modules {
			why[m.Name] = m.For
			optional[m.Name] = m.Optional
			ifDevice[m.Name] = m.IfDevice
		}
	}
	cmdline, _ := os.ReadFile(cfg.path("/proc/cmdline"))
	params := ModuleParams(string(cmdline))
	var rs ModuleResults
	for _, n := range names {
		r := ModuleResult{Name: n, For: why[n], Params: params[canonical(n)]}
		switch err := loader.Load(n, r.Params); {
		case builtin[canonical(n)]:
			r.Status = ModBuiltin
		case err == nil:
			r.Status = ModLoaded
		case errors.Is(err, ErrModuleNotFound) && (pl == nil || optional[n]):
			r.Status = ModOptional
		case errors.Is(err, ErrModuleNotFound):
			r.Status, r.Err = ModMissing, err.Error()
		case ifDevice[n] && errors.Is(err, unix.ENODEV):
			r.Status = ModNoDevice
		default:
			r.Status, r.Err = ModFailed, err.Error()
		}
		rs = append(rs, r)
	}
	return rs
}

func canonical(n string) string { return strings.ReplaceAll(n, "-", "_") }

// ModuleParams collects the module parameters of a kernel command line,
// MODULE.PARAM=VALUE as modprobe reads them from /proc/cmdline for a
// loadable module (the kernel itself applies them only to built-in
// ones): per module (dashes as underscores), "PARAM=VALUE ..." in command
// line order. A value may be double-quoted to hold spaces. So a card's
// module option is set by editing the APPEND line of syslinux.cfg on the
// boot partition, with no rebuild: hifn_795x.hifn_pll_ref=ext, or the
// test engine's ocfw_testaes.delay_us=2000.
func ModuleParams(cmdline string) map[string]string {
	out := map[string]string{}
	for _, arg := range splitCmdline(cmdline) {
		key, val, ok := strings.Cut(arg, "=")
		mod, param, dot := strings.Cut(key, ".")
		if !ok || !dot || mod == "" || param == "" || strings.ContainsAny(mod, "/") {
			continue
		}
		if strings.ContainsAny(val, " \t") {
			val = `"` + val + `"`
		}
		mod = canonical(mod)
		if out[mod] != "" {
			out[mod] += " "
		}
		out[mod] += param + "=" + val
	}
	return out
}

// splitCmdline splits at spaces outside double quotes, dropping the
// quotes, as the kernel's next_arg does.
func splitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case (r == ' ' || r == '\t' || r == '\n') && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// builtinModules reads modules.builtin of the running kernel's modules.
func builtinModules(cfg *Config) map[string]bool {
	out := map[string]bool{}
	dirs, _ := filepath.Glob(cfg.path("/lib/modules/*/modules.builtin"))
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		for _, l := range strings.Fields(string(b)) {
			base := filepath.Base(l)
			base = strings.TrimSuffix(base, ".ko")
			out[canonical(base)] = true
		}
	}
	return out
}

type noModules struct{ err error }

func (n noModules) Load(string, string) error { return fmt.Errorf("%w: %v", ErrModuleNotFound, n.err) }
