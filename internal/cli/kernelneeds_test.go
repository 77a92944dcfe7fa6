package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateFragments = flag.Bool("update-fragments", false, "rewrite the kernel config fragments in boards/kernel from 'ocfw kernel config'")

// The fragments shipped in boards/kernel are what 'ocfw kernel config'
// writes today.
func TestKernelConfigShipped(t *testing.T) {
	for _, board := range []string{"nslu2", "avila-gw2348"} {
		out, errs, code := ocfw(t, "kernel", "config", "--board", board)
		if code != 0 {
			t.Fatalf("kernel config --board %s: exit %d: %s", board, code, errs)
		}
		name := filepath.Join("..", "..", "boards", "kernel", board+".config")
		if *updateFragments {
			must(t, os.WriteFile(name, []byte(out), 0o644))
			continue
		}
		shipped, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (write it: go test ./internal/cli -run TestKernelConfigShipped -update-fragments)", err)
		}
		if string(shipped) != out {
			t.Errorf("%s differs from 'ocfw kernel config --board %s': regenerate it with "+
				"go test ./internal/cli -run TestKernelConfigShipped -update-fragments", name, board)
		}
	}
}

func TestKernelConfig(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		want   []string // in stdout (code 0) or stderr
		absent []string
	}{
		{[]string{"--board", "nslu2"}, 0, []string{"# Kernel config fragment for nslu2", "# CONFIG_CPU_BIG_ENDIAN is not set\n", "CONFIG_AEABI=y\n",
			"CONFIG_IXP4XX_NPE=y\n", "CONFIG_CRYPTO_DEV_IXP4XX=m\n", "CONFIG_ARM_APPENDED_DTB=y\n", "(or, instead: CONFIG_MACH_NSLU2)",
			"merge_config.sh", "intel-ixp42x-linksys-nslu2.dtb"}, []string{"CONFIG_PCI_IXP4XX"}},
		{[]string{"--board", "gw2348-4", "--card", "vpn1411"}, 0, []string{"avila-gw2348 + vpn1411", "--card vpn1411", "CONFIG_CRYPTO_DEV_HIFN_795X=m\n",
			"CONFIG_PCI_IXP4XX=y\n", "CONFIG_MACH_AVILA"}, nil},
		{[]string{"--board", "alix2d13"}, 0, []string{"CONFIG_CRYPTO_DEV_GEODE=m\n", "CONFIG_BLK_DEV_INITRD=y\n"}, []string{"IXP4XX", "CONFIG_CPU_BIG_ENDIAN", "CONFIG_AEABI"}},
		{nil, 1, []string{"--board is required"}, nil},
		{[]string{"--board", "nosuch"}, 1, []string{"nosuch"}, nil},
	} {
		out, errs, code := ocfw(t, append([]string{"kernel", "config"}, tc.args...)...)
		text := out
		if tc.code != 0 {
			text = errs
		}
		if code != tc.code {
			t.Errorf("kernel config %s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), code, tc.code, out, errs)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("kernel config %s: output lacks %q", strings.Join(tc.args, " "), w)
			}
		}
		for _, w := range tc.absent {
			if strings.Contains(text, w) {
				t.Errorf("kernel config %s: output has %q", strings.Join(tc.args, " "), w)
			}
		}
	}
}

// Without --kernel, a board with no Debian kernel gets what its kernel
// needs and an error: nothing was checked. With one, every need is
// checked and every problem listed.
func TestKernelCheckNeeds(t *testing.T) {
	for _, tc := range []struct {
		board string
		cards []string
		want  []string
	}{
		{"nslu2", nil, []string{"nothing was checked", "Version and byte order", "7.3", "3.2 to 5.18", "6.1 and 6.12",
			"CONFIG_CPU_BIG_ENDIAN not set", "CONFIG_ARM_APPENDED_DTB=y and CONFIG_ARM_ATAG_DTB_COMPAT=y, or CONFIG_MACH_NSLU2=y",
			"CONFIG_IXP4XX_NPE=y or m", "NPE-B  for Ethernet port wan (eth0", "NPE-C  for the ixp4xx crypto engine",
			"--firmware-file NPE-B --firmware-file NPE-C", "APEX", "big-endian bit", "ocfw kernel config --board nslu2"}},
		{"avila-gw2348", []string{"vpn1411"}, []string{"NPE-C  for Ethernet port lan (eth1", "CONFIG_CRYPTO_DEV_HIFN_795X", "BASE.redboot.txt",
			"ocfw kernel config --board avila-gw2348 --card vpn1411"}},
	} {
		args := []string{"kernel", "check", "--board", tc.board}
		for _, c := range tc.cards {
			args = append(args, "--card", c)
		}
		out, errs, code := ocfw(t, args...)
		if code != 1 || !strings.Contains(errs, "nothing was checked") || !strings.Contains(errs, "--kernel") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and the nothing-checked error", strings.Join(args, " "), code, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(out+errs, w) {
				t.Errorf("%s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}

	// With --kernel: a fake little-endian zImage, the planned modules and
	// a config from the fragment with the NPE driver dropped and the CPU
	// big-endian: both named, with the rest of the fragment passing.
	frag, _, _ := ocfw(t, "kernel", "config", "--board", "nslu2")
	nslu2Mods := []string{"af_alg", "algif_skcipher", "algif_hash", "crypto_user", "des_generic", "ixp4xx_crypto", "ixp4xx_eth",
		"crc32c_generic", "libcrc32c", "nfnetlink", "nf_tables", "nft_objref", "nf_defrag_ipv4", "nf_defrag_ipv6", "nf_conntrack", "nft_ct", "nf_nat", "nft_chain_nat", "nft_nat", "nft_masq", "nft_limit", "nft_fib", "nft_fib_ipv4", "nft_fib_ipv6", "nft_fib_inet", "bridge",
		"ctr", "sha512_generic", "drbg", "cbc", "hmac", "sha1_generic", "sha256_generic", "xfrm_algo", "xfrm_user", "esp4", "esp6", "authenc", "authencesn", "echainiv", "seqiv"}
	dir := fakeKernelDir(t, true, nslu2Mods...)
	writeFile(t, filepath.Join(dir, "config"), []byte(frag))
	out, errs, code := ocfw(t, "kernel", "check", "--board", "nslu2", "--kernel", dir)
	if code != 0 || !strings.Contains(out, "for nslu2: ok") {
		t.Errorf("kernel from the fragment: exit %d\n%s%s", code, out, errs)
	}
	bad := strings.Replace(frag, "CONFIG_IXP4XX_NPE=y\n", "", 1) + "CONFIG_CPU_BIG_ENDIAN=y\n"
	writeFile(t, filepath.Join(dir, "config"), []byte(bad))
	_, errs, code = ocfw(t, "kernel", "check", "--board", "nslu2", "--kernel", dir)
	for _, w := range []string{"2 problems", "CONFIG_IXP4XX_NPE is not set", "CONFIG_CPU_BIG_ENDIAN=y"} {
		if code != 1 || !strings.Contains(errs, w) {
			t.Errorf("bad config: exit %d, stderr lacks %q:\n%s", code, w, errs)
		}
	}
}
