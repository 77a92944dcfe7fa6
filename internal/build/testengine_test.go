package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/kernel"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/testengine"
	"github.com/ocfw/ocfw/plan"
)

func standInPlan(t *testing.T, cards ...string) *plan.Plan {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := cat.Resolve(boards.Request{Board: "alix2d13", Cards: cards, Ciphers: []string{"aes-128-cbc"}})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// The test module is built only for a plan that names testaes, and every
// way it cannot be built is an error that says what to do.
func TestTestEngineModule(t *testing.T) {
	if testEngine(standInPlan(t)) || testEngine(standInPlan(t, "virtio-crypto")) || !testEngine(standInPlan(t, "testaes")) {
		t.Error("the test engine is built for a plan without --card testaes, or not for one with it")
	}
	pl := standInPlan(t, "testaes")

	// A given initramfs cannot take the module: refused before anything.
	dir := t.TempDir()
	_, err := Build(context.Background(), pl, Options{Output: filepath.Join(dir, "x.img"), Initramfs: filepath.Join(dir, "initrd")})
	var given *InitramfsGivenError
	if !errors.As(err, &given) || given.Input != InputTestEngine || !strings.Contains(err.Error(), "its module ocfw_testaes goes into the initramfs ocfw builds") {
		t.Errorf("--initramfs with testaes: %v", err)
	}

	// No make on PATH: the error names the tools and the package.
	t.Run("no make", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := buildTestEngine(context.Background(), pl, &kernel.Kernel{Version: "6.1.0-57-686"}, t.Logf)
		var te *TestEngineError
		if !errors.Is(err, testengine.ErrNoTools) || !errors.As(err, &te) || !strings.Contains(err.Error(), "apt-get install make gcc-12") {
			t.Errorf("without make: %v", err)
		}
	})

	// Built for Debian's kernel: another kernel (--kernel) is refused.
	t.Run("another kernel", func(t *testing.T) {
		if testing.Short() {
			t.Skip("may fetch headers and compile the module; -short")
		}
		_, err := buildTestEngine(context.Background(), pl, &kernel.Kernel{Version: "6.1.0-0-other"}, t.Logf)
		if errors.Is(err, testengine.ErrNoTools) || errors.Is(err, testengine.ErrNoKernel) {
			labtest.SkipOrFail(t, "%v", err)
		}
		if err == nil || !strings.Contains(err.Error(), "but this image boots kernel 6.1.0-0-other") {
			t.Errorf("module for another kernel: %v", err)
		}
	})
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("left %v behind", es)
	}
}

// An image is built without /dev/crypto, saying why, when cryptodev.ko
// cannot be: no make, or a kernel (--kernel) other than the Debian
// package it is built for; a plan without it builds none.
func TestDevCryptoWithout(t *testing.T) {
	pl := standInPlan(t)
	var log strings.Builder
	logf := func(f string, a ...any) { log.WriteString(fmt.Sprintf(f, a...) + "\n") }

	t.Run("no make", func(t *testing.T) {
		log.Reset()
		t.Setenv("PATH", t.TempDir())
		ko, err := buildDevCrypto(context.Background(), pl, &kernel.Kernel{Version: "6.1.0-57-686"}, logf)
		if ko != "" || err != nil || !strings.Contains(log.String(), "no /dev/crypto in this image: ") || !strings.Contains(log.String(), "apt-get install make gcc-12") {
			t.Errorf("without make: %q, %v, log %q", ko, err, log.String())
		}
	})
	t.Run("user kernel", func(t *testing.T) {
		log.Reset()
		user := *pl
		user.Kernel.Source = plan.KernelUser
		ko, err := buildDevCrypto(context.Background(), &user, &kernel.Kernel{Version: "6.1.0-0-other"}, logf)
		if ko != "" || err != nil || !strings.Contains(log.String(), "not a Debian package") {
			t.Errorf("user kernel: %q, %v, log %q", ko, err, log.String())
		}
	})
	if !plannedModule(pl, "cryptodev") || plannedModule(pl, "no-such-module") {
		t.Error("plannedModule: the ALIX plan's cryptodev not found, or an unplanned module found")
	}
}
