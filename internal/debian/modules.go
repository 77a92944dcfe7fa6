package debian

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Module is one loadable kernel module of a modules tree.
type Module struct {
	Name string   // canonical name: dashes as underscores ("geode_aes")
	Path string   // slash path relative to lib/modules/VERSION
	Deps []string // direct dependencies, canonical names
}

// ModuleIndex knows a kernel's loadable and built-in modules.
type ModuleIndex struct {
	Dir     string             // lib/modules/VERSION
	Modules map[string]*Module // by canonical name
	Builtin map[string]bool    // canonical names from modules.builtin
}

// ModuleName turns a file name or module name into the kernel's canonical
// module name: "kernel/drivers/crypto/geode-aes.ko.xz" → "geode_aes".
func ModuleName(s string) string {
	s = path.Base(filepath.ToSlash(s))
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		s = strings.TrimSuffix(s, ext)
	}
	s = strings.TrimSuffix(s, ".ko")
	return strings.ReplaceAll(s, "-", "_")
}

func isModuleFile(name string) bool {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// LoadModuleIndex reads dir (a lib/modules/VERSION directory): its
// modules.dep when present, else the depends= field of every plain .ko's
// .modinfo section (Debian packages ship no modules.dep: depmod runs at
// install time), and modules.builtin.
func LoadModuleIndex(dir string) (*ModuleIndex, error) {
	idx := &ModuleIndex{Dir: dir, Modules: map[string]*Module{}, Builtin: map[string]bool{}}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, line := range strings.Fields(string(b)) {
			idx.Builtin[ModuleName(line)] = true
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	switch {
	case err == nil:
		defer f.Close()
		if err := idx.parseDep(f); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
	case os.IsNotExist(err):
		if err := idx.scan(); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	if len(idx.Modules) == 0 {
		return nil, fmt.Errorf("%s: no kernel modules found", dir)
	}
	return idx, nil
}

func (idx *ModuleIndex) parseDep(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		file, deps, ok := strings.Cut(text, ":")
		if !ok {
			return fmt.Errorf("line %d: want \"module.ko: deps...\", got %q", line, text)
		}
		m := &Module{Name: ModuleName(file), Path: strings.TrimPrefix(file, "/")}
		// modules.dep lists every transitive dependency; the index keeps
		// them all as direct ones, which gives the same closure.
		for _, d := range strings.Fields(deps) {
			m.Deps = append(m.Deps, ModuleName(d))
		}
		idx.Modules[m.Name] = m
	}
	return sc.Err()
}

func (idx *ModuleIndex) scan() error {
	return filepath.WalkDir(idx.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			if !d.IsDir() && isModuleFile(p) {
				return fmt.Errorf("%s: compressed modules need a modules.dep (run depmod)", p)
			}
			return nil
		}
		deps, err := modinfoDepends(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(idx.Dir, p)
		if err != nil {
			return err
		}
		m := &Module{Name: ModuleName(p), Path: filepath.ToSlash(rel), Deps: deps}
		idx.Modules[m.Name] = m
		return nil
	})
}

// modinfoDepends returns the depends= list from a module's .modinfo.
func modinfoDepends(file string) ([]string, error) {
	info, err := Modinfo(file)
	if err != nil {
		return nil, err
	}
	var deps []string
	for _, d := range strings.Split(info["depends"], ",") {
		if d != "" {
			deps = append(deps, ModuleName(d))
		}
	}
	return deps, nil
}

// Modinfo reads a module file's .modinfo fields (name, depends,
// vermagic, ...), the first value of each.
func Modinfo(file string) (map[string]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", file, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("kernel module %s: no .modinfo section", file)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: .modinfo: %w", file, err)
	}
	info := map[string]string{}
	for _, field := range bytes.Split(data, []byte{0}) {
		k, v, ok := bytes.Cut(field, []byte("="))
		if _, seen := info[string(k)]; ok && !seen {
			info[string(k)] = string(v)
		}
	}
	return info, nil
}

// AddFile adds a module built outside the kernel's tree (file, on this
// host) to the index at rel, a slash path under the modules directory
// such as "extra/ocfw_testaes.ko", with the dependencies its .modinfo
// names; a module of the same name already there is an error.
func (idx *ModuleIndex) AddFile(file, rel string) (*Module, error) {
	deps, err := modinfoDepends(file)
	if err != nil {
		return nil, err
	}
	m := &Module{Name: ModuleName(rel), Path: rel, Deps: deps}
	if old, ok := idx.Modules[m.Name]; ok || idx.Builtin[m.Name] {
		where := "built in"
		if ok {
			where = old.Path
		}
		return nil, fmt.Errorf("kernel module %s: the kernel has its own %s (%s)", file, m.Name, where)
	}
	idx.Modules[m.Name] = m
	return m, nil
}

// MissingModulesError lists every requested module the kernel has neither
// as a file nor built in.
type MissingModulesError struct {
	Dir     string
	Missing []string
}

func (e *MissingModulesError) Error() string {
	return fmt.Sprintf("kernel modules not found in %s (neither a .ko nor in modules.builtin): %s",
		e.Dir, strings.Join(e.Missing, ", "))
}

// Closure returns the modules to load for names, dependencies before the
// modules that need them, each once. Names that are built into the kernel
// are returned in builtin and need no loading. Unknown names are all
// reported together in a *MissingModulesError.
func (idx *ModuleIndex) Closure(names ...string) (load []*Module, builtin []string, err error) {
	seen := map[string]bool{}
	onStack := map[string]bool{}
	var missing []string
	var visit func(name, from string) error
	visit = func(name, from string) error {
		if seen[name] {
			return nil
		}
		m, ok := idx.Modules[name]
		if !ok {
			if idx.Builtin[name] {
				seen[name] = true
				builtin = append(builtin, name)
				return nil
			}
			if from != "" {
				name += " (needed by " + from + ")"
			}
			missing = append(missing, name)
			return nil
		}
		if onStack[name] {
			return fmt.Errorf("kernel modules: dependency cycle through %s", name)
		}
		onStack[name] = true
		for _, d := range m.Deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		onStack[name] = false
		seen[name] = true
		load = append(load, m)
		return nil
	}
	for _, n := range names {
		if err := visit(ModuleName(n), ""); err != nil {
			return nil, nil, err
		}
	}
	if len(missing) > 0 {
		return nil, nil, &MissingModulesError{Dir: idx.Dir, Missing: missing}
	}
	return load, builtin, nil
}

// WriteDep writes a modules.dep for mods (or every module when mods is
// nil) in depmod's format: each line lists all transitive dependencies,
// the ones to load last first, as modprobe and u-root's kmodule expect.
func (idx *ModuleIndex) WriteDep(w io.Writer, mods []*Module) error {
	if mods == nil {
		for _, m := range idx.Modules {
			mods = append(mods, m)
		}
		sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	}
	bw := bufio.NewWriter(w)
	for _, m := range mods {
		order, _, err := idx.Closure(m.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "%s:", m.Path)
		for i := len(order) - 2; i >= 0; i-- { // the last one is m itself
			fmt.Fprintf(bw, " %s", order[i].Path)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}
