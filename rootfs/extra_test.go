package rootfs

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/kernel"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/testengine"
)

// The test engine's module, built for Debian's 686 kernel, goes under
// extra/ with a modules.dep line, as the boot's loader finds modules;
// a plan that does not name it, or another kernel, is refused.
func TestExtraModules(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the Debian kernel's modules and builds the test module; -short")
	}
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	with, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: []string{"testaes"}, Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	deb, err := debian.CachedKernel(with.Kernel.Package, with.Kernel.Arch, "")
	if err != nil {
		labtest.SkipOrFail(t, "kernel package not cached (`ocfw kernel fetch --board alix2d13`): %v", err)
	}
	mod, err := testengine.Build(context.Background(), testengine.Options{Log: t.Logf})
	if errors.Is(err, testengine.ErrNoTools) || errors.Is(err, testengine.ErrNoKernel) {
		labtest.SkipOrFail(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Load(context.Background(), with, deb, "")
	if err != nil {
		t.Fatal(err)
	}
	names, recs, _, sums, err := moduleRecords(with, k, []string{mod.Path})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, r := range recs {
		files[r.Name] = r.Name
	}
	root := path.Join("lib/modules", k.Version)
	if files[path.Join(root, "extra/ocfw_testaes.ko")] == "" || !strings.Contains(strings.Join(names, " "), "ocfw_testaes") || sums["ocfw_testaes.ko"] == "" {
		t.Errorf("module not packed: names %v, sums %v", names, sums)
	}
	var dep string
	for _, r := range recs {
		if r.Name == path.Join(root, "modules.dep") {
			b := make([]byte, r.FileSize)
			if _, err := r.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			dep = string(b)
		}
	}
	if !strings.Contains(dep, "\nextra/ocfw_testaes.ko:\n") && !strings.HasPrefix(dep, "extra/ocfw_testaes.ko:\n") {
		t.Errorf("modules.dep lacks the test module:\n%s", dep)
	}

	without, err := cat.Resolve(boards.Request{Board: "alix2d13", Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := moduleRecords(without, k, []string{mod.Path}); err == nil || !strings.Contains(err.Error(), "does not load ocfw_testaes") {
		t.Errorf("a plan without testaes took its module: %v", err)
	}
	other := *k
	other.Version = "6.1.0-0-other"
	if _, _, _, _, err := moduleRecords(with, &other, []string{mod.Path}); err == nil || !strings.Contains(err.Error(), "not this image's 6.1.0-0-other") {
		t.Errorf("a module for another kernel: %v", err)
	}
}
