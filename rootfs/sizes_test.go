package rootfs

import (
	"context"
	"encoding/binary"
	"github.com/ocfw/ocfw/kernel"
	"os"
	"path/filepath"
	"testing"

	"github.com/ocfw/ocfw/boards"
)

// Every board's initramfs, with the full plan, fits its budget; the log
// has the sizes the README quotes. Geode boards use Debian's kernel and
// its modules; the kernel.IXP4xx boards have no kernel to hand here, so theirs
// is the userland alone (their modules come with the user's kernel).
func TestBoardSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the userland for every board")
	}
	needGo(t)
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range cat.Boards() {
		t.Run(b.Name, func(t *testing.T) {
			p, err := cat.Resolve(boards.Request{Board: b.Name})
			if err != nil {
				t.Fatal(err)
			}
			var k *kernel.Kernel
			if p.Kernel.Source == "debian" {
				k = debianKernel(t, p)
			} else {
				img := make([]byte, 0x40)
				binary.LittleEndian.PutUint32(img[0x24:], 0x016f2818)
				name := filepath.Join(t.TempDir(), "zImage")
				if err := os.WriteFile(name, img, 0o644); err != nil {
					t.Fatal(err)
				}
				k = &kernel.Kernel{Image: name, Arch: kernel.ArchARM, Source: name}
			}
			res, err := Build(context.Background(), p, Options{Kernel: k, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if budget := int64(p.Image.InitramfsBudgetKB) * 1024; budget > 0 && res.Size > budget {
				t.Errorf("%d bytes, over the %d-byte budget", res.Size, budget)
			}
			if res.Size >= res.RawSize {
				t.Errorf("compressed %d bytes, raw %d: compression did nothing", res.Size, res.RawSize)
			}
			t.Logf("%s (%s): raw %d KiB, %s %d KiB, %d modules, built in %v", p.Board, p.Go.GOARCH, res.RawSize/1024,
				p.Image.Compression, res.Size/1024, len(res.Modules), res.Took.Round(100*1e6))
		})
	}
}
