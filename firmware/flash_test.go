package firmware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fakeDevices map[string]*Device

func (f fakeDevices) Describe(p string) (*Device, error) {
	if d, ok := f[p]; ok {
		return d, nil
	}
	return SysDevices{}.Describe(p)
}

func TestFlashFileTargetAndVerify(t *testing.T) {
	dir := t.TempDir()
	m, img := buildALIX(t, dir, ImageOptions{})
	target := filepath.Join(dir, "card.bin")
	// Stale data on the "card" outside the mapped ranges must not matter,
	// inside them it must be overwritten.
	if err := os.WriteFile(target, bytes.Repeat([]byte{0xa5}, int(m.BlockMap.ImageSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	var prog bytes.Buffer
	if err := Flash(context.Background(), img, target, FlashOptions{Yes: true, Progress: &prog}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prog.String(), "verified") || !strings.Contains(prog.String(), "MiB/s") {
		t.Errorf("progress output:\n%s", prog.String())
	}
	if m.BlockMap.Mapped >= m.BlockMap.ImageSize/2 {
		t.Errorf("block map covers %d of %d bytes: it should skip free space", m.BlockMap.Mapped, m.BlockMap.ImageSize)
	}
	if err := Verify(img, target, FlashOptions{}); err != nil {
		t.Fatal(err)
	}
	// The written card is a valid image too.
	if info, err := Inspect(target); err != nil || len(info.Partitions) != 2 {
		t.Fatalf("inspect of the written target: %v", err)
	}
	// A byte changed inside a mapped range after writing: verify fails.
	r := m.BlockMap.Ranges[len(m.BlockMap.Ranges)/2]
	f, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, r.Offset+r.Length/2)
	f.WriteAt([]byte{b[0] ^ 0xff}, r.Offset+r.Length/2)
	f.Close()
	if err := Verify(img, target, FlashOptions{}); !errors.Is(err, ErrVerify) {
		t.Fatalf("verify after corrupting the target: %v, want ErrVerify", err)
	}
}

func TestFlashDetectsCorruptionAfterWrite(t *testing.T) {
	dir := t.TempDir()
	m, img := buildALIX(t, dir, ImageOptions{})
	target := filepath.Join(dir, "card.bin")
	opts := FlashOptions{Yes: true, afterWrite: func(p string) {
		f, _ := os.OpenFile(p, os.O_RDWR, 0)
		f.WriteAt([]byte("X"), m.BlockMap.Ranges[0].Offset+446) // the partition table
		f.Close()
	}}
	if err := Flash(context.Background(), img, target, opts); !errors.Is(err, ErrVerify) {
		t.Fatalf("Flash returned %v, want ErrVerify", err)
	}
	// The target was a new file: a failed flash does not leave it behind.
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("a failed flash left the new target file %s behind (stat: %v)", target, err)
	}
}

// A target under /dev must be an existing block device: a mistyped or
// absent card must not become a regular file in /dev.
func TestFlashRefusesNonDeviceUnderDev(t *testing.T) {
	dir := t.TempDir()
	_, img := buildALIX(t, dir, ImageOptions{})
	missing := fmt.Sprintf("/dev/ocfw-test-absent-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(missing) })
	devs := fakeDevices{"/dev/sdq": {Path: "/dev/sdq"}} // a regular file someone left in /dev
	for _, tc := range []struct {
		target string
		want   string
	}{
		{missing, "there is no such device"},
		{"/dev/sdq", "it is a regular file"},
	} {
		asked := false
		err := Flash(context.Background(), img, tc.target, FlashOptions{Yes: true, Devices: devs, Confirm: func(string) bool { asked = true; return true }})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "lsblk") || !strings.Contains(err.Error(), "block device") {
			t.Errorf("%s: got %v, want a refusal saying %q and suggesting lsblk", tc.target, err, tc.want)
		}
		if asked {
			t.Errorf("%s: asked for confirmation before refusing", tc.target)
		}
	}
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Errorf("flash created %s (stat: %v)", missing, err)
	}
	// Outside /dev a new regular file is a fine target (TestFlashFileTargetAndVerify).
}

// A target shorter than the image is reported with where it ends, never
// with a "(<nil>)" for the missing read error.
func TestVerifyShortTarget(t *testing.T) {
	dir := t.TempDir()
	m, img := buildALIX(t, dir, ImageOptions{})
	target := filepath.Join(dir, "short.bin")
	last := m.BlockMap.Ranges[len(m.BlockMap.Ranges)-1]
	if err := os.WriteFile(target, make([]byte, last.Offset+last.Length/2), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Verify(img, target, FlashOptions{})
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("verify of a short target: %v, want ErrVerify", err)
	}
	if strings.Contains(err.Error(), "<nil>") || !strings.Contains(err.Error(), fmt.Sprintf("it ends at byte %d", last.Offset+last.Length/2)) {
		t.Errorf("message %q: want where the target ends and no <nil>", err)
	}
}

// An image changed after its build (booted, written to) is refused before
// anything is written or asked, and the message says so rather than
// "verify failed".
func TestFlashRefusesChangedImage(t *testing.T) {
	dir := t.TempDir()
	m, img := buildALIX(t, dir, ImageOptions{})
	r := m.BlockMap.Ranges[len(m.BlockMap.Ranges)-1]
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, r.Offset)
	f.WriteAt([]byte{b[0] ^ 0x01}, r.Offset)
	f.Close()
	target := filepath.Join(dir, "card.bin")
	asked := false
	err = Flash(context.Background(), img, target, FlashOptions{Confirm: func(string) bool { asked = true; return true }})
	if !errors.Is(err, ErrImageChanged) || errors.Is(err, ErrVerify) {
		t.Fatalf("flash of a changed image: %v, want ErrImageChanged", err)
	}
	for _, want := range []string{"changed since it was built", "nothing was written", "rebuild"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "verify failed") {
		t.Errorf("message %q says verify failed, but nothing was written", err)
	}
	if asked {
		t.Error("asked for confirmation for an image it then refused")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the refused flash created %s", target)
	}
}

func TestFlashRefusals(t *testing.T) {
	dir := t.TempDir()
	_, img := buildALIX(t, dir, ImageOptions{})
	card := &Device{Path: "/dev/sdz", Name: "sdz", Block: true, Size: 128e6, Removable: true}
	with := func(f func(d *Device)) *Device { d := *card; f(&d); return &d }
	devs := fakeDevices{
		"/dev/mounted": with(func(d *Device) { d.Mounts = []string{"/media/card"} }),
		"/dev/root":    with(func(d *Device) { d.Mounts = []string{"/"}; d.HoldsRoot = true }),
		"/dev/fixed":   with(func(d *Device) { d.Removable = false }),
		"/dev/huge":    with(func(d *Device) { d.Size = 500e9 }),
		"/dev/small":   with(func(d *Device) { d.Size = 64e6 }),
		"/dev/part":    with(func(d *Device) { d.Partition = true }),
	}
	for _, tc := range []struct {
		target string
		force  bool
		want   string
	}{
		{"/dev/mounted", true, "mounted"},
		{"/dev/root", true, "root file system"},
		{"/dev/fixed", false, "not a removable disk"},
		{"/dev/huge", false, "64 GiB"},
		{"/dev/small", true, "only"},
		{"/dev/part", true, "partition"},
		{img, true, "image itself"},
	} {
		t.Run(filepath.Base(tc.target), func(t *testing.T) {
			err := Flash(context.Background(), img, tc.target, FlashOptions{Yes: true, Force: tc.force, Devices: devs})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// --force lets a non-removable or large disk through the checks
	// (checkTarget alone: there is no such device to write).
	for _, p := range []string{"/dev/fixed", "/dev/huge"} {
		if err := checkTarget(img, devs[p], 120*MiB, true); err != nil {
			t.Errorf("%s with --force: %v", p, err)
		}
	}
	// No confirmation: nothing written.
	target := filepath.Join(dir, "unconfirmed.bin")
	asked := ""
	err := Flash(context.Background(), img, target, FlashOptions{Confirm: func(p string) bool { asked = p; return false }})
	if err == nil || asked == "" {
		t.Fatalf("unconfirmed flash: %v (asked %q)", err, asked)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("unconfirmed flash created the target")
	}
}

func TestMountsOf(t *testing.T) {
	dir := t.TempDir()
	mounts := filepath.Join(dir, "mounts")
	os.WriteFile(mounts, []byte("/dev/sda1 / ext4 rw 0 0\n/dev/sdb1 /media/my\\040card vfat rw 0 0\nproc /proc proc rw 0 0\n"), 0o644)
	swaps := filepath.Join(dir, "swaps")
	os.WriteFile(swaps, []byte("Filename Type Size Used Priority\n/dev/sdc2 partition 100 0 -2\n"), 0o644)
	for _, tc := range []struct {
		names map[string]bool
		where string
		root  bool
	}{
		{map[string]bool{"sda": true, "sda1": true}, "/", true},
		{map[string]bool{"sdb": true, "sdb1": true}, "/media/my card", false},
		{map[string]bool{"sdc": true, "sdc2": true}, "swap", false},
		{map[string]bool{"sdd": true}, "", false},
	} {
		where, root := mountsOf(mounts, swaps, tc.names)
		if strings.Join(where, ",") != tc.where || root != tc.root {
			t.Errorf("%v: %v %v, want %q %v", tc.names, where, root, tc.where, tc.root)
		}
	}
}
