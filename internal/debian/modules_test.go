package debian

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func names(mods []*Module) string {
	var s []string
	for _, m := range mods {
		s = append(s, m.Name)
	}
	return strings.Join(s, " ")
}

func testIndex() *ModuleIndex {
	idx := &ModuleIndex{Dir: "/m", Modules: map[string]*Module{}, Builtin: map[string]bool{"hmac": true, "cbc": true}}
	for _, m := range []*Module{
		{Name: "af_alg", Path: "kernel/crypto/af_alg.ko"},
		{Name: "algif_skcipher", Path: "kernel/crypto/algif_skcipher.ko", Deps: []string{"af_alg"}},
		{Name: "algif_hash", Path: "kernel/crypto/algif_hash.ko", Deps: []string{"af_alg"}},
		{Name: "libdes", Path: "kernel/lib/crypto/libdes.ko"},
		{Name: "des_generic", Path: "kernel/crypto/des_generic.ko", Deps: []string{"libdes"}},
		{Name: "top", Path: "top.ko", Deps: []string{"mid", "des_generic"}},
		{Name: "mid", Path: "mid.ko", Deps: []string{"libdes", "algif_hash"}},
		{Name: "cyc_a", Path: "a.ko", Deps: []string{"cyc_b"}},
		{Name: "cyc_b", Path: "b.ko", Deps: []string{"cyc_a"}},
		{Name: "needs_ghost", Path: "g.ko", Deps: []string{"ghost"}},
	} {
		idx.Modules[m.Name] = m
	}
	return idx
}

func TestClosure(t *testing.T) {
	tests := []struct {
		in          []string
		load, built string
		missing     string
	}{
		{in: []string{"algif_skcipher", "algif_hash"}, load: "af_alg algif_skcipher algif_hash"},
		{in: []string{"des-generic"}, load: "libdes des_generic"},
		{in: []string{"top"}, load: "libdes af_alg algif_hash mid des_generic top"},
		{in: []string{"hmac", "af_alg", "cbc"}, load: "af_alg", built: "hmac cbc"},
		{in: []string{"nope", "af_alg", "needs_ghost", "nope2"}, missing: "nope, ghost (needed by needs_ghost), nope2"},
	}
	for _, tt := range tests {
		load, built, err := testIndex().Closure(tt.in...)
		if tt.missing != "" {
			var me *MissingModulesError
			if !errors.As(err, &me) || strings.Join(me.Missing, ", ") != tt.missing {
				t.Errorf("Closure(%v) err = %v, want missing %s", tt.in, err, tt.missing)
			}
			continue
		}
		if err != nil {
			t.Errorf("Closure(%v): %v", tt.in, err)
			continue
		}
		if names(load) != tt.load || strings.Join(built, " ") != tt.built {
			t.Errorf("Closure(%v) = %q, builtin %q; want %q, %q", tt.in, names(load), built, tt.load, tt.built)
		}
	}
	if _, _, err := testIndex().Closure("cyc_a"); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: err = %v", err)
	}
}

// WriteDep's output, read back, gives the same closures: the format
// round-trips and each line's reversed list is a valid load order.
func TestWriteDepRoundTrip(t *testing.T) {
	idx := testIndex()
	delete(idx.Modules, "cyc_a")
	delete(idx.Modules, "cyc_b")
	delete(idx.Modules, "needs_ghost")
	var buf bytes.Buffer
	if err := idx.WriteDep(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "top.ko: kernel/crypto/des_generic.ko mid.ko kernel/crypto/algif_hash.ko kernel/crypto/af_alg.ko kernel/lib/crypto/libdes.ko\n") {
		t.Errorf("modules.dep:\n%s", buf.String())
	}
	back := &ModuleIndex{Dir: "/m", Modules: map[string]*Module{}, Builtin: idx.Builtin}
	if err := back.parseDep(&buf); err != nil {
		t.Fatal(err)
	}
	for name := range idx.Modules {
		a, _, _ := idx.Closure(name)
		b, _, err := back.Closure(name)
		if err != nil {
			t.Fatal(err)
		}
		pos := map[string]int{}
		for i, m := range b {
			pos[m.Name] = i
		}
		if len(a) != len(b) {
			t.Errorf("%s: closure %q after round trip, want %q", name, names(b), names(a))
		}
		for _, m := range a {
			for _, d := range m.Deps {
				if pos[d] > pos[m.Name] {
					t.Errorf("%s: %s loads before its dependency %s", name, m.Name, d)
				}
			}
		}
	}
}

func TestParseDepErrors(t *testing.T) {
	idx := &ModuleIndex{Modules: map[string]*Module{}}
	if err := idx.parseDep(strings.NewReader("kernel/a.ko:\nno colon here\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v, want line 2", err)
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/drivers/crypto/geode-aes.ko": "geode_aes",
		"hifn_795x.ko.xz":                    "hifn_795x",
		"des-generic":                        "des_generic",
		"x.ko.zst":                           "x",
	} {
		if got := ModuleName(in); got != want {
			t.Errorf("ModuleName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A modules tree without modules.dep is indexed from each .ko's modinfo.
func TestLoadModuleIndexFromModinfo(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"kernel/crypto/af_alg.ko":         fakeModule("af_alg", ""),
		"kernel/crypto/algif_skcipher.ko": fakeModule("algif_skcipher", "af_alg"),
		"kernel/crypto/des_generic.ko":    fakeModule("des_generic", "libdes"),
		"kernel/lib/crypto/libdes.ko":     fakeModule("libdes", ""),
		"modules.builtin":                 []byte("kernel/crypto/hmac.ko\nkernel/crypto/cbc.ko\n"),
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := LoadModuleIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	load, built, err := idx.Closure("des_generic", "algif_skcipher", "hmac")
	if err != nil {
		t.Fatal(err)
	}
	if names(load) != "libdes des_generic af_alg algif_skcipher" || strings.Join(built, ",") != "hmac" {
		t.Errorf("closure = %q builtin %q", names(load), built)
	}
	if got := idx.Modules["des_generic"].Path; got != "kernel/crypto/des_generic.ko" {
		t.Errorf("path = %q", got)
	}

	// A module built outside the tree joins the index with its own
	// dependencies, and its modules.dep line names them.
	extra := filepath.Join(t.TempDir(), "ocfw_testaes.ko")
	if err := os.WriteFile(extra, fakeModule("ocfw_testaes", "af_alg"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := Modinfo(extra)
	if err != nil || info["name"] != "ocfw_testaes" || info["depends"] != "af_alg" {
		t.Errorf("Modinfo = %v, %v", info, err)
	}
	m, err := idx.AddFile(extra, "extra/ocfw_testaes.ko")
	if err != nil || m.Name != "ocfw_testaes" {
		t.Fatalf("AddFile = %+v, %v", m, err)
	}
	load, _, err = idx.Closure("ocfw_testaes")
	var dep strings.Builder
	if err == nil {
		err = idx.WriteDep(&dep, load)
	}
	if err != nil || names(load) != "af_alg ocfw_testaes" || !strings.Contains(dep.String(), "extra/ocfw_testaes.ko: kernel/crypto/af_alg.ko\n") {
		t.Errorf("closure %q, modules.dep %q, %v", names(load), dep.String(), err)
	}
	for _, rel := range []string{"extra/ocfw_testaes.ko", "extra/hmac.ko"} {
		if _, err := idx.AddFile(extra, rel); err == nil || !strings.Contains(err.Error(), "the kernel has its own") {
			t.Errorf("AddFile %s twice or over a built-in: %v", rel, err)
		}
	}

	os.WriteFile(filepath.Join(dir, "kernel/bad.ko"), []byte("not elf"), 0o644)
	if _, err := LoadModuleIndex(dir); err == nil || !strings.Contains(err.Error(), "bad.ko") {
		t.Errorf("corrupt module: err = %v, want it to name bad.ko", err)
	}
}

func TestExtractKernel(t *testing.T) {
	const v = "6.1.0-99-686"
	deb := writeDeb(t, []entry{
		{name: "./boot/vmlinuz-" + v, body: "bzImage"},
		{name: "./boot/config-" + v, body: "CONFIG_CRYPTO_USER_API_SKCIPHER=m\n"},
		{name: "./boot/System.map-" + v, body: "ignored"},
		{name: "./usr/share/doc/linux-image/changelog", body: "ignored"},
		{name: "./lib/modules/" + v + "/kernel/crypto/af_alg.ko", body: string(fakeModule("af_alg", ""))},
		{name: "./lib/modules/" + v + "/kernel/crypto/algif_hash.ko", body: string(fakeModule("algif_hash", "af_alg"))},
		{name: "./lib/modules/" + v + "/modules.builtin", body: "kernel/crypto/md5.ko\n"},
	})
	dir := t.TempDir()
	k, err := ExtractKernel(deb, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Kernel{
		Version:    v,
		Vmlinuz:    filepath.Join(dir, "boot/vmlinuz-"+v),
		Config:     filepath.Join(dir, "boot/config-"+v),
		ModulesDir: filepath.Join(dir, "lib/modules", v),
	}
	if *k != want {
		t.Errorf("kernel = %+v, want %+v", *k, want)
	}
	for _, p := range []string{"boot/System.map-" + v, "usr"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s extracted", p)
		}
	}
	dep, err := os.ReadFile(filepath.Join(k.ModulesDir, "modules.dep"))
	if err != nil || string(dep) != "kernel/crypto/af_alg.ko:\nkernel/crypto/algif_hash.ko: kernel/crypto/af_alg.ko\n" {
		t.Errorf("modules.dep = %q, %v", dep, err)
	}
	again, err := OpenKernelDir(dir)
	if err != nil || *again != want {
		t.Errorf("OpenKernelDir = %+v, %v", again, err)
	}
}

func TestExtractKernelNotAKernel(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"no image", []entry{{name: "./usr/bin/true", body: "x"}}, "no boot/vmlinuz"},
		{"no modules", []entry{{name: "./boot/vmlinuz-1", body: "x"}}, "no lib/modules/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ExtractKernel(writeDeb(t, tt.entries), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestExtractKernelCached(t *testing.T) {
	deb := writeDeb(t, []entry{
		{name: "./boot/vmlinuz-2", body: "bzImage"},
		{name: "./lib/modules/2/kernel/x.ko", body: string(fakeModule("x", ""))},
	})
	cache := t.TempDir()
	k, err := ExtractKernelCached(deb, cache)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "kernels", "test", "boot", "vmlinuz-2"); k.Vmlinuz != want {
		t.Errorf("Vmlinuz = %s, want %s", k.Vmlinuz, want)
	}
	// The second call reads the cache: it works with the .deb gone.
	os.Remove(deb)
	again, err := ExtractKernelCached(deb, cache)
	if err != nil || *again != *k {
		t.Errorf("cached = %+v, %v", again, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(cache, "kernels", ".extract-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary directories left: %v", leftovers)
	}
}

// An ARM package's device trees come along, whether the kernel is
// extracted fresh or was cached before they were kept.
func TestExtractKernelDTBs(t *testing.T) {
	const v = "6.1.0-99-rpi"
	deb := writeDeb(t, []entry{
		{name: "./boot/vmlinuz-" + v, body: "zImage"},
		{name: "./lib/modules/" + v + "/kernel/crypto/af_alg.ko", body: string(fakeModule("af_alg", ""))},
		{name: "./usr/lib/linux-image-" + v + "/bcm2835-rpi-a-plus.dtb", body: "dtb"},
		{name: "./usr/share/doc/linux-image/changelog", body: "ignored"},
	})
	for _, tt := range []struct {
		name string
		old  bool // cached before device trees were kept
	}{{"fresh", false}, {"old cache", true}} {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			dir := filepath.Join(cache, "kernels", "test")
			if tt.old {
				if _, err := Extract(deb, dir, func(n string) bool { return isKernelFile(n) && !isDTBFile(n) }); err != nil {
					t.Fatal(err)
				}
				if k, err := OpenKernelDir(dir); err != nil || k.DTBDir != "" {
					t.Fatalf("old cache: %+v, %v", k, err)
				}
			}
			k, err := ExtractKernelCached(deb, cache)
			if err != nil {
				t.Fatal(err)
			}
			dtb, err := k.DTB("bcm2835-rpi-a-plus.dtb")
			if want := filepath.Join(dir, "usr/lib/linux-image-"+v, "bcm2835-rpi-a-plus.dtb"); err != nil || dtb != want {
				t.Errorf("DTB = %q, %v; want %s", dtb, err, want)
			}
			if _, err := k.DTB("none.dtb"); err == nil || !strings.Contains(err.Error(), "no device tree none.dtb") {
				t.Errorf("missing DTB: err = %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "usr/share")); !os.IsNotExist(err) {
				t.Errorf("usr/share extracted")
			}
			// Later calls need the package no more.
			moved := deb + ".away"
			os.Rename(deb, moved)
			defer os.Rename(moved, deb)
			if again, err := ExtractKernelCached(deb, cache); err != nil || again.DTBDir != k.DTBDir {
				t.Errorf("cached again: %+v, %v", again, err)
			}
		})
	}
}
