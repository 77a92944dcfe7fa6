package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The --kernel forms the help and README document, as accepted or
// refused by kernel check (kernel.Load).
func TestKernelSpecForms(t *testing.T) {
	dir := fakeKernelDir(t, false, "af_alg", "algif_skcipher", "algif_hash", "crypto_user", "des_generic", "geode_aes",
		"via_rhine", "e1000", "crc32c_generic", "libcrc32c", "nfnetlink", "nf_tables", "nft_objref", "nf_defrag_ipv4", "nf_defrag_ipv6", "nf_conntrack", "nft_ct", "nf_nat", "nft_chain_nat", "nft_nat", "nft_masq", "nft_limit", "nft_fib", "nft_fib_ipv4", "nft_fib_ipv6", "nft_fib_inet", "bridge",
		"ctr", "sha512_generic", "drbg", "cbc", "hmac", "sha1_generic", "sha256_generic", "xfrm_algo", "xfrm_user", "esp4", "esp6", "authenc", "authencesn", "echainiv", "seqiv")
	img := filepath.Join(dir, "bzImage")
	allY := filepath.Join(t.TempDir(), "config")
	var cfg strings.Builder
	for _, o := range []string{"BLK_DEV_INITRD", "DEVTMPFS", "RD_XZ", "CRYPTO_USER_API", "CRYPTO_USER_API_SKCIPHER", "CRYPTO_USER_API_HASH", "CRYPTO_USER", "CRYPTO_DES", "CRYPTO_DEV_GEODE",
		"VIA_RHINE", "E1000", "CRYPTO_CRC32C", "LIBCRC32C", "NETFILTER_NETLINK", "NF_TABLES", "NFT_OBJREF", "NF_DEFRAG_IPV4", "NF_DEFRAG_IPV6", "NF_CONNTRACK", "NFT_CT", "NF_NAT", "NFT_NAT", "NFT_MASQ", "NFT_LIMIT", "NFT_FIB", "NFT_FIB_IPV4", "NFT_FIB_IPV6", "NFT_FIB_INET", "BRIDGE",
		"CRYPTO_CTR", "CRYPTO_SHA512", "CRYPTO_DRBG", "CRYPTO_CBC", "CRYPTO_HMAC", "CRYPTO_SHA1", "CRYPTO_SHA256", "XFRM_ALGO", "XFRM_USER", "INET_ESP", "INET6_ESP", "CRYPTO_AUTHENC", "CRYPTO_ECHAINIV", "CRYPTO_SEQIV"} {
		cfg.WriteString("CONFIG_" + o + "=y\n")
	}
	must(t, os.WriteFile(allY, []byte(cfg.String()), 0o644))
	for _, tc := range []struct {
		name, spec string
		ok         bool
		want       string
	}{
		{"directory", dir, true, "modules  " + filepath.Join(dir, "lib/modules/6.1.0-t")},
		{"IMAGE:MODULESDIR", img + ":" + filepath.Join(dir, "lib/modules/6.1.0-t"), true, "kernel 6.1.0-t"},
		{"IMAGE:MODULESDIR above lib/modules", img + ":" + dir, true, "kernel 6.1.0-t"},
		{"IMAGE:MODULESDIR:CONFIG", img + ":" + dir + ":" + allY, true, "config   " + allY},
		{"IMAGE::CONFIG, everything built in", img + "::" + allY, true, "built in af_alg algif_skcipher algif_hash crypto_user des_generic geode_aes"},
		{"IMAGE alone", img, false, "no modules directory given"},
	} {
		out, errs, code := ocfw(t, "kernel", "check", "--board", "alix2d13", "--kernel", tc.spec)
		if (code == 0) != tc.ok || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%s (--kernel %s): exit %d, want ok=%v and %q\n%s%s", tc.name, tc.spec, code, tc.ok, tc.want, out, errs)
		}
	}
	// build --help documents the same forms.
	out, _, _ := ocfw(t, "build", "--help")
	if !strings.Contains(out, "IMAGE::CONFIG") || !strings.Contains(out, "an IMAGE alone is refused") {
		t.Errorf("build --help does not document the --kernel forms:\n%s", out)
	}
}
