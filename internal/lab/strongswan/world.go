package strongswan

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/worldvm"
)

// StartWorld boots a world VM with root's tree, the kernel's tunnel
// modules (and more, e.g. the firewall's for a NAT) and one swanctl.conf
// per instance, waits for its agent, and, should the test fail, logs
// each instance's charon output.
func StartWorld(t testing.TB, name string, root *Root, confs map[Instance][]byte, modules ...string) *worldvm.World {
	t.Helper()
	files := map[string][]byte{}
	var ins []Instance
	for in, conf := range confs {
		ins = append(ins, in)
		for k, v := range in.Files(conf) {
			files[k] = v
		}
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].Name < ins[j].Name })
	w := worldvm.StartTest(t, worldvm.Config{Name: name, Modules: append(Modules(), modules...), Files: files,
		Trees: []string{root.Dir}, MemoryMB: 512})
	ctx := context.Background()
	boot, err := w.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("world ready %v after QEMU started (initramfs built in %v)", boot.Round(time.Millisecond), w.Build.Round(time.Millisecond))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, in := range ins {
			if out, err := w.Do(ctx, "output charon-"+in.Name); err == nil {
				t.Logf("charon %s:\n%s", in.Name, out)
			}
		}
	})
	return w
}
