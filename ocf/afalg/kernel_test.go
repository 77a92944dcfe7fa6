package afalg

import (
	"testing"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// guestModules are the modules this package's tests need in Debian's
// linux-image-686: the AF_ALG interfaces, DES (with libdes, from
// modules.dep), ecb for the null cipher and cryptd for the asynchronous
// stand-in engine. cbc, aes, hmac, md5, sha1, sha256 and crypto_null are
// built into that kernel; they are listed so a kernel that has them as
// modules still works.
var guestModules = []string{
	"af_alg", "algif_skcipher", "algif_hash",
	"des_generic", "ecb", "cryptd",
	"cbc", "aes_generic", "hmac", "md5", "sha1_generic", "sha256_generic", "crypto_null",
}

// TestKernelInTheLoop runs this package's tests inside QEMU with a real
// kernel that has AF_ALG (this host's kernel has none): the TestKernel*
// tests that skip here run there against the kernel crypto API. Guest
// benchmarks: OCFW_KERNELTEST_BENCH=. go test -run TestKernelInTheLoop -v.
func TestKernelInTheLoop(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	kerneltest.Run(t, kerneltest.Options{Modules: guestModules})
}

// guestModulesARM are the same for the ARM stand-in's kernel (Debian
// armel's linux-image-rpi), which has no cryptd (CONFIG_CRYPTO_CRYPTD is
// not set: the asynchronous stand-in's tests skip there) and adds its ARM
// assembler AES and SHA, the kernel software an IXP4xx kernel has too.
var guestModulesARM = []string{
	"af_alg", "algif_skcipher", "algif_hash",
	"des_generic", "ecb",
	"cbc", "aes_generic", "hmac", "md5", "sha1_generic", "sha256_generic", "crypto_null",
	"aes_arm", "sha1_arm", "sha256_arm",
}

// TestKernelInTheLoopARM runs the same tests on ARM: GOARCH=arm GOARM=5,
// the IXP4xx boards' target, on QEMU's raspi1ap with Debian's armel rpi
// kernel (the ARM stand-in; QEMU has no IXP4xx machine).
func TestKernelInTheLoopARM(t *testing.T) {
	if kerneltest.InGuest() {
		t.Skip("inside the guest: this test only starts it")
	}
	kerneltest.Run(t, kerneltest.Options{Arch: "armel", Modules: guestModulesARM})
}
