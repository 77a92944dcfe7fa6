package cli

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeKernelDir writes a kernel directory: an x86 or ARM image header and
// a modules tree with mods.
func fakeKernelDir(t *testing.T, arm bool, mods ...string) string {
	t.Helper()
	d := t.TempDir()
	img := make([]byte, 0x400)
	name := "bzImage"
	if arm {
		binary.LittleEndian.PutUint32(img[0x24:], 0x016f2818)
		copy(img[0x30:], []byte{1, 2, 3, 4})
		name = "zImage"
	} else {
		img[0x1fe], img[0x1ff] = 0x55, 0xaa
		copy(img[0x202:], "HdrS")
	}
	writeFile(t, filepath.Join(d, name), img)
	var dep strings.Builder
	for _, m := range mods {
		fmt.Fprintf(&dep, "kernel/%s.ko:\n", m)
		writeFile(t, filepath.Join(d, "lib/modules/6.1.0-t/kernel", m+".ko"), []byte(m))
	}
	writeFile(t, filepath.Join(d, "lib/modules/6.1.0-t/modules.dep"), []byte(dep.String()))
	return d
}

func TestKernelFetch(t *testing.T) {
	// A cached package is found without apt-get or the network.
	cache := t.TempDir()
	debs := filepath.Join(cache, "debian", "i386", "debs")
	writeFile(t, filepath.Join(debs, "linux-image-6.1.0-9-686_6.1.1-1_i386.deb"), []byte("!<arch>\n"))
	writeFile(t, filepath.Join(debs, "linux-image-686.fetched"), []byte("linux-image-6.1.0-9-686_6.1.1-1_i386.deb\n"))
	out, errs, code := ocfw(t, "kernel", "fetch", "--board", "alix2d13", "--cache", cache)
	if code != 0 || !strings.Contains(out, filepath.Join(debs, "linux-image-6.1.0-9-686_6.1.1-1_i386.deb")) {
		t.Errorf("cached fetch: exit %d\n%s%s", code, out, errs)
	}

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "fetch", "--board", "nslu2", "--cache", cache}, "no Debian kernel package to fetch"},
		{[]string{"kernel", "fetch", "--cache", cache}, "--board is required"},
		{[]string{"kernel", "fetch", "--board", "nosuch", "--cache", cache}, "nosuch"},
	}
	for _, tc := range tests {
		_, errs, code := ocfw(t, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("ocfw %s: exit %d, stderr %q; want 1 and %q", strings.Join(tc.args, " "), code, errs, tc.want)
		}
	}
}

func TestKernelCheck(t *testing.T) {
	// Without aes_ti, the ESP run's veth, the watchdogs (optional) and cryptodev (out of tree, built by ocfw build): named
	// absent, not a problem (the tunnels' modules are required).
	alixMods := []string{"af_alg", "algif_skcipher", "algif_hash", "crypto_user", "des_generic", "geode_aes",
		// the ports' NIC, QEMU's NIC and the router's firewall and bridge
		"via_rhine", "e1000", "crc32c_generic", "libcrc32c", "nfnetlink", "nf_tables", "nft_objref", "nf_defrag_ipv4", "nf_defrag_ipv6", "nf_conntrack", "nft_ct", "nf_nat", "nft_chain_nat", "nft_nat", "nft_masq", "nft_limit", "nft_fib", "nft_fib_ipv4", "nft_fib_ipv6", "nft_fib_inet", "bridge",
		"ctr", "sha512_generic", "drbg", "cbc", "hmac", "sha1_generic", "sha256_generic", "xfrm_algo", "xfrm_user", "esp4", "esp6", "authenc", "authencesn", "echainiv", "seqiv"}
	good := fakeKernelDir(t, false, alixMods...)
	out, errs, code := ocfw(t, "kernel", "check", "--board", "alix2d13", "--kernel", good)
	if code != 0 || !strings.Contains(out, "kernel 6.1.0-t (x86) for alix2d13: ok") || !strings.Contains(out, "absent   aes_ti veth cryptodev cs5535_mfd cs5535_mfgpt geodewdt i6300esb (out of tree or optional") {
		t.Errorf("good kernel: exit %d\n%s%s", code, out, errs)
	}
	// cryptodev is absent from every kernel's tree: the check says how
	// /dev/crypto's module is made and what it needs of the kernel.
	for _, w := range []string{"  cryptodev cryptodev.ko (/dev/crypto, cryptodev-linux 1.14), which ocfw build compiles", "(make, gcc-12)",
		"that kernel's headers", "the kernel needs CONFIG_MODULES=y, CONFIG_CRYPTO_SKCIPHER=", "CONFIG_CRYPTO_AEAD="} {
		if !strings.Contains(out, w) {
			t.Errorf("good kernel: the check lacks %q:\n%s", w, out)
		}
	}
	// A Hifn card adds its driver to the plan: this kernel lacks it.
	_, errs, code = ocfw(t, "kernel", "check", "--board", "alix2d13", "--card", "vpn1411", "--kernel", good)
	if code != 1 || !strings.Contains(errs, "hifn_795x") {
		t.Errorf("missing card driver: exit %d, %s", code, errs)
	}
	arm := fakeKernelDir(t, true, alixMods[:1]...)
	_, errs, code = ocfw(t, "kernel", "check", "--board", "alix2d13", "--kernel", arm)
	for _, w := range []string{"2 problems", "ARM (zImage)", "algif_skcipher, ", "des_generic, ", "geode_aes, ", "via_rhine"} {
		if code != 1 || !strings.Contains(errs, w) {
			t.Errorf("wrong arch and modules: exit %d, stderr lacks %q:\n%s", code, w, errs)
		}
	}
}

// treeSize counts what a fetch wrote under the cache: files in
// subdirectories included, a missing directory as nothing.
func TestTreeSize(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "lists", "partial"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a.deb"), make([]byte, 1000), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "lists", "partial", "x"), make([]byte, 234), 0o644))
	if n := treeSize(dir); n != 1234 {
		t.Errorf("treeSize = %d, want 1234", n)
	}
	if n := treeSize(filepath.Join(dir, "none")); n != 0 {
		t.Errorf("treeSize of a missing directory = %d", n)
	}
}
