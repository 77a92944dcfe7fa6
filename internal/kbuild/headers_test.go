package kbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPatchMakefile(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"include /usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", ""},
		// Patched before, and the cache moved since.
		{"include /old/usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", ""},
		{"include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", "include /c/usr/src/linux-headers-6.1.0-57-common/Makefile\n", ""},
		{"obj-m := x.o\n", "", "no \"include"},
	} {
		dir := t.TempDir()
		mk := filepath.Join(dir, "Makefile")
		os.WriteFile(mk, []byte(tc.in), 0o644)
		err := patchMakefile(dir, "/c/usr/src/linux-headers-6.1.0-57-common")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v", tc.in, err)
			}
			continue
		}
		b, _ := os.ReadFile(mk)
		if err != nil || string(b) != tc.want {
			t.Errorf("%q: %q, %v", tc.in, b, err)
		}
	}
}

func TestCompiler(t *testing.T) {
	for _, tc := range []struct{ vars, want string }{
		{"override ARCH = x86\nCC = $(if $(DEBIAN_KERNEL_USE_CCACHE),$(CCACHE)) $(CROSS_COMPILE)gcc-12\n", "gcc-12"},
		{"CC = gcc-13\n", "gcc-13"},
		{"CC = clang\n", ""},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".kernelvariables"), []byte(tc.vars), 0o644)
		got, err := compiler(dir)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%q: %q, %v", tc.vars, got, err)
		}
	}
}

// Env drops what would change what kbuild builds for, and sets the C
// locale.
func TestEnv(t *testing.T) {
	for _, kv := range []string{"ARCH=arm", "CROSS_COMPILE=arm-linux-", "CC=clang", "M=x", "KCFLAGS=-O0", "LC_ALL=de_DE"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("OCFW_KEEP", "1")
	got := " " + strings.Join(Env(), " ") + " "
	for _, bad := range []string{" ARCH=", " CROSS_COMPILE=", " CC=", " M=", " KCFLAGS=", " LC_ALL=de_DE "} {
		if strings.Contains(got, bad) {
			t.Errorf("Env keeps %q", bad)
		}
	}
	if !strings.Contains(got, " OCFW_KEEP=1 ") || !strings.HasSuffix(got, " LC_ALL=C ") {
		t.Errorf("Env: %s", got)
	}
}
