package main

import (
	"bufio"
	"context"
	"fmt"
	"github.com/ocfw/ocfw/kernel"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
	"github.com/ulikunitz/xz"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/rootfs"
)

// ocfwCommand builds cmd/ocfw and returns its path when it has the build
// command, or "" when it does not (yet).
func (r *runner) ocfwCommand(ctx context.Context) string {
	bin := filepath.Join(r.tmp, "ocfw")
	if _, err := r.run(ctx, nil, "go", "build", "-o", bin, "./cmd/ocfw"); err != nil {
		r.logf("cmd/ocfw does not build (%v): timing the build's library calls instead", err)
		return ""
	}
	if _, err := r.run(ctx, nil, bin, "build", "--help"); err != nil {
		r.logf("ocfw has no build command: timing the build's library calls instead")
		return ""
	}
	return bin
}

// timeOcfwBuild runs `ocfw build` for board into dir and splits its time
// by watching its work directory: mkuimage's busybox cpio appearing
// (.ocfw-rootfs-*/.build-*/uroot.cpio) ends Go compilation, the finished
// initramfs (.ocfw-rootfs-*/initramfs.cpio.*) ends the rootfs step, and the
// image is laid out from then to the command's exit. The initramfs is
// linked aside before the command removes its work directory.
func (r *runner) timeOcfwBuild(ctx context.Context, bin, board, dir string, env []string) (*imageBuild, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	img := filepath.Join(dir, board+".img")
	kept := filepath.Join(dir, "initramfs.kept")
	var tBuild, tUserland, tInitramfs time.Time
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			now := time.Now()
			if tBuild.IsZero() {
				if m, _ := filepath.Glob(filepath.Join(dir, ".ocfw-rootfs-*", ".build-*")); len(m) > 0 {
					tBuild = now
				}
			}
			if tUserland.IsZero() {
				if m, _ := filepath.Glob(filepath.Join(dir, ".ocfw-rootfs-*", ".build-*", "uroot.cpio")); len(m) > 0 {
					tUserland = now
				}
			}
			if tInitramfs.IsZero() {
				if m, _ := filepath.Glob(filepath.Join(dir, ".ocfw-rootfs-*", "initramfs.cpio*")); len(m) > 0 {
					tInitramfs = now
					if err := os.Link(m[0], kept); err != nil {
						r.logf("keeping the initramfs: %v", err)
					}
				}
			}
		}
	}()
	t0 := time.Now()
	_, err := r.run(ctx, append([]string{fmt.Sprintf("SOURCE_DATE_EPOCH=%d", benchEpoch)}, env...),
		bin, "build", "--no-cache", "--board", board, "-o", img) // item 4 times the compile; rebuild the cache
	end := time.Now()
	close(done)
	<-watched
	if err != nil {
		return nil, err
	}
	if tBuild.IsZero() || tUserland.IsZero() || tInitramfs.IsZero() {
		return nil, fmt.Errorf("ocfw build: did not see its work directory's steps in %s (work dir layout changed?)", dir)
	}
	b := &imageBuild{Board: board, KernelS: tBuild.Sub(t0).Seconds(), UserlandS: tUserland.Sub(tBuild).Seconds(),
		AssembleS: tInitramfs.Sub(tUserland).Seconds(), ImageS: end.Sub(tInitramfs).Seconds(), TotalS: end.Sub(t0).Seconds(),
		ImagePath: img}
	fi, err := os.Stat(img)
	if err != nil {
		return nil, err
	}
	b.Image = fi.Size()
	if b.Packed, b.Raw, b.Parts, err = initramfsParts(kept); err != nil {
		return nil, err
	}
	return b, nil
}

// initramfsParts reads an xz-compressed initramfs: its size, the cpio's
// size and its biggest files.
func initramfsParts(name string) (packed, raw int64, parts []rootfs.Part, err error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, 0, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, nil, err
	}
	xr, err := xz.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("%s: %w", name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "raw-")
	if err != nil {
		return 0, 0, nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if raw, err = io.Copy(tmp, xr); err != nil {
		return 0, 0, nil, fmt.Errorf("%s: %w", name, err)
	}
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(tmp))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, rec := range recs {
		if rec.Mode&cpio.S_IFMT == cpio.S_IFREG {
			parts = append(parts, rootfs.Part{Name: "/" + rec.Name, Size: int64(rec.FileSize)})
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Size > parts[j].Size })
	if len(parts) > 12 {
		parts = parts[:12]
	}
	return fi.Size(), raw, parts, nil
}

// kernelFor is the plan's cached kernel image and console argument, for
// the reference boot.
func kernelFor(ctx context.Context, board string) (image, arg string, err error) {
	cat, err := boards.Embedded()
	if err != nil {
		return "", "", err
	}
	plan, err := cat.Resolve(boards.Request{Board: board})
	if err != nil {
		return "", "", err
	}
	k, err := kernel.Load(ctx, plan, "", "")
	if err != nil {
		return "", "", err
	}
	return k.Image, plan.Console.KernelArg, nil
}
