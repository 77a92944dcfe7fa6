package qemu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/internal/lab/labtest"
)

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
		err  string
	}{
		{
			name: "kernel and initrd",
			cfg:  Config{Kernel: "/k", Initrd: "/i", Append: "console=ttyS0 panic=-1"},
			want: "-M pc -accel tcg -m 256 -nographic -monitor none -serial stdio -no-reboot -nodefaults -no-user-config -cpu pentium2 -kernel /k -initrd /i -append console=ttyS0 panic=-1",
		},
		{
			name: "disk, more memory, extra args",
			cfg:  Config{Disk: "/cf.img", MemoryMB: 512, Args: []string{"-smp", "1"}},
			want: "-M pc -accel tcg -m 512 -nographic -monitor none -serial stdio -no-reboot -nodefaults -no-user-config -cpu pentium2 -drive file=/cf.img,format=raw,if=ide -smp 1",
		},
		{
			name: "arm",
			cfg:  Config{Arch: "arm", Kernel: "/zImage", CPU: "cortex-a7"},
			want: "-M virt -accel tcg -m 256 -nographic -monitor none -serial stdio -no-reboot -nodefaults -no-user-config -cpu cortex-a7 -kernel /zImage",
		},
		{
			name: "raspi stand-in with an SD card",
			cfg:  RaspiStandIn.Config("/zImage", "/a-plus.dtb", "/initrd", RaspiStandIn.Cmdline("rdinit=/init"), "/sd.img"),
			want: "-M raspi1ap -accel tcg -m 512 -nographic -monitor none -serial stdio -no-reboot -nodefaults -no-user-config -kernel /zImage -initrd /initrd -dtb /a-plus.dtb " +
				"-append console=ttyAMA0 initcall_blacklist=bcm2835_power_driver_init rdinit=/init -drive file=/sd.img,format=raw,if=sd -icount shift=auto",
		},
		{
			name: "watchdog after the NICs, reset on expiry",
			cfg:  Config{Disk: "/cf.img", Reboot: true, Watchdog: true, NICs: []NIC{{RestrictedUser: true}}},
			want: "-M pc -accel tcg -m 256 -nographic -monitor none -serial stdio -nodefaults -no-user-config -cpu pentium2 -drive file=/cf.img,format=raw,if=ide " +
				"-netdev user,id=net0,restrict=on -device e1000,netdev=net0,romfile= -device i6300esb -action watchdog=reset",
		},
		{
			name: "USB cards behind the hub",
			cfg: func() Config {
				c, err := RaspiStandIn.PlugNICs(Config{Arch: "arm", Machine: "raspi1ap", Kernel: "/k", NICs: []NIC{{RestrictedUser: true}}},
					[]NIC{{RestrictedUser: true, MAC: "52:54:00:00:00:01"}, {Socket: "/lan", MAC: "52:54:00:00:00:02"}})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}(),
			want: "-M raspi1ap -accel tcg -m 256 -nographic -monitor none -serial stdio -no-reboot -nodefaults -no-user-config -kernel /k " +
				"-device usb-hub,bus=usb-bus.0,port=1 " +
				"-netdev user,id=net0,restrict=on -device usb-net,netdev=net0,bus=usb-bus.0,port=1.1,mac=52:54:00:00:00:01 " +
				"-netdev stream,id=net1,server=off,addr.type=unix,addr.path=/lan -device usb-net,netdev=net1,bus=usb-bus.0,port=1.2,mac=52:54:00:00:00:02",
		},
		{name: "watchdog on arm", cfg: Config{Arch: "arm", Kernel: "/k", Watchdog: true}, err: "needs the i386 guest"},
		{name: "nothing to boot", cfg: Config{}, err: "nothing to boot"},
		{name: "dtb without kernel", cfg: Config{Disk: "/d", DTB: "/x.dtb"}, err: "need a Kernel"},
		{name: "unknown disk interface", cfg: Config{Disk: "/d", DiskInterface: "scsi"}, err: "want ide or sd"},
		{name: "append without kernel", cfg: Config{Disk: "/d", Append: "x"}, err: "need a Kernel"},
		{name: "comma in disk", cfg: Config{Disk: "/a,b"}, err: "comma"},
		{name: "unknown arch", cfg: Config{Arch: "mips", Kernel: "/k"}, err: "unknown guest architecture"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := tt.cfg.CommandLine()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(args, " "); got != tt.want {
				t.Errorf("args:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMissingEmulatorNamesPackage(t *testing.T) {
	for arch, pkg := range map[string]string{"i386": "qemu-system-x86", "arm": "qemu-system-arm"} {
		_, err := Start(context.Background(), Config{Arch: arch, Binary: "no-such-qemu-binary", Kernel: "/k"})
		if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install "+pkg) {
			t.Errorf("%s: err = %v, want ErrNotInstalled naming %s", arch, err, pkg)
		}
	}
}

// fakeEmulator writes a shell script that stands in for QEMU, so the
// console, input and watchdog handling are tested without a guest.
func fakeEmulator(t *testing.T, script string) Config {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-qemu")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(dir, "kernel")
	os.WriteFile(kernel, nil, 0o644)
	return Config{Binary: bin, Kernel: kernel, Timeout: 10 * time.Second}
}

func TestConsoleConversation(t *testing.T) {
	cfg := fakeEmulator(t, `echo "login: prompt"; read line; echo "you said <$line>"; echo "exit code 7"`)
	ctx := context.Background()
	vm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	if err := vm.WaitFor(ctx, "login:"); err != nil {
		t.Fatal(err)
	}
	if err := vm.Send("uname -a\n"); err != nil {
		t.Fatal(err)
	}
	m, err := vm.WaitForRegexp(ctx, regexp.MustCompile(`exit code (\d+)`))
	if err != nil {
		t.Fatal(err)
	}
	if m[1] != "7" {
		t.Errorf("submatch = %q", m)
	}
	if err := vm.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if !strings.Contains(vm.Console(), "you said <uname -a>") {
		t.Errorf("console = %q", vm.Console())
	}
	// Matches move forward: the text already consumed is not found again.
	if err := vm.WaitFor(ctx, "login:"); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("second WaitFor after exit: err = %v", err)
	}
}

func TestWatchdogKillsSilentHang(t *testing.T) {
	cfg := fakeEmulator(t, `echo "Booting from Hard Disk..."; exec sleep 600`)
	cfg.Timeout = 500 * time.Millisecond
	start := time.Now()
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = vm.WaitFor(context.Background(), "never printed")
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("WaitFor err = %v, want *TimeoutError", err)
	}
	if !strings.Contains(te.Error(), "Booting from Hard Disk...") || !strings.Contains(te.Error(), "watchdog") {
		t.Errorf("timeout message lacks the console tail: %q", te.Error())
	}
	if err := vm.Wait(); !errors.As(err, &te) {
		t.Errorf("Wait err = %v, want *TimeoutError", err)
	}
	// Far below the emulator's 600 s sleep, far above a loaded machine's
	// scheduling delays: the watchdog, not the process, ended the run.
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("watchdog took %v", d)
	}
}

func TestContextCancelKills(t *testing.T) {
	cfg := fakeEmulator(t, `echo up; exec sleep 600`)
	ctx, cancel := context.WithCancel(context.Background())
	vm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.WaitFor(context.Background(), "up"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := vm.Wait(); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("Wait after cancel: %v", err)
	}
}

func TestEmulatorFailureShowsStderr(t *testing.T) {
	cfg := fakeEmulator(t, `echo "qemu: could not load kernel" >&2; exit 1`)
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(); err == nil || !strings.Contains(err.Error(), "could not load kernel") {
		t.Errorf("Wait err = %v", err)
	}
}

// A real emulator, no kernel: SeaBIOS reports on the serial console that
// an empty disk does not boot. Proves the console wiring of the real
// command line.
func TestRealEmulatorConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts qemu-system-i386; skipped with -short")
	}
	cfg := Config{Timeout: 2 * time.Minute}
	if err := Installed(cfg.Arch); err != nil {
		labtest.SkipOrFail(t, "real emulator not started: %v", err)
	}
	cfg.Disk = filepath.Join(t.TempDir(), "empty.img")
	if err := os.WriteFile(cfg.Disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	if err := vm.WaitFor(context.Background(), "No bootable device"); err != nil {
		t.Fatal(err)
	}
	t.Logf("SeaBIOS gave up after %v", vm.Elapsed())
}

// A negative Timeout is no watchdog at all (a timer of a negative
// duration would fire at once and kill the guest).
func TestNoWatchdog(t *testing.T) {
	cfg := fakeEmulator(t, `echo up; read line; echo "bye <$line>"`)
	cfg.Timeout = -1
	ctx := context.Background()
	vm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	if err := vm.WaitFor(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	if err := vm.Send("done\n"); err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if !strings.Contains(vm.Console(), "bye <done>") {
		t.Errorf("console %q", vm.Console())
	}
}

func TestConfigString(t *testing.T) {
	c := Config{Arch: "arm", Machine: "raspi1ap", MemoryMB: 512, Kernel: "/k", Append: "console=ttyAMA0 rdinit=/init"}
	want := "qemu-system-arm -M raspi1ap -accel tcg -m 512 -nographic -monitor none -serial stdio -no-reboot -nodefaults -no-user-config -kernel /k -append 'console=ttyAMA0 rdinit=/init'"
	if got := c.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
}

func TestStandInCheckDisk(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		size int64
		ok   bool
	}{{32 << 20, true}, {32<<20 + 512, false}, {0, false}} {
		name := filepath.Join(dir, "sd.img")
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, tt.size); err != nil {
			t.Fatal(err)
		}
		err := RaspiStandIn.CheckDisk(name)
		if (err == nil) != tt.ok {
			t.Errorf("size %d: err = %v, want ok %v", tt.size, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "power-of-2") {
			t.Errorf("size %d: err = %v, want it to say power-of-2", tt.size, err)
		}
	}
}

// TestFrozen: inside Frozen the emulator writes nothing (its file stays
// the size it was), after it the emulator goes on writing.
func TestFrozen(t *testing.T) {
	out := filepath.Join(t.TempDir(), "disk")
	cfg := fakeEmulator(t, `echo up; while :; do echo x >> `+out+`; done`)
	ctx := context.Background()
	vm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	if err := vm.WaitFor(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(out)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	for end := time.Now().Add(10 * time.Second); size() == 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
	}
	var during [2]int64
	err = vm.Frozen(func() error {
		during[0] = size()
		time.Sleep(200 * time.Millisecond)
		during[1] = size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during[0] == 0 || during[0] != during[1] {
		t.Errorf("frozen, the file went from %d to %d bytes", during[0], during[1])
	}
	grew := false
	for end := time.Now().Add(10 * time.Second); !grew && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		grew = size() > during[1]
	}
	if !grew {
		t.Errorf("after Frozen the emulator wrote nothing more (%d bytes)", size())
	}
	// f's error is Frozen's, and the emulator still goes on.
	if err := vm.Frozen(func() error { return errors.New("f failed") }); err == nil || err.Error() != "f failed" {
		t.Errorf("Frozen returned %v, want f's error", err)
	}
	vm.Kill()
	if err := vm.Frozen(func() error { return nil }); err == nil {
		t.Error("Frozen on an exited emulator: no error")
	}
}
