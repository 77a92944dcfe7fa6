package kernel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
)

func resolvePlan(t *testing.T, board string) *plan.Plan {
	t.Helper()
	cat, err := boards.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Resolve(boards.Request{Board: board})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bzImage is the smallest header IdentifyImage takes for an x86 kernel.
func bzImage() []byte {
	b := make([]byte, 0x400)
	b[0x1fe], b[0x1ff] = 0x55, 0xaa
	copy(b[0x202:], "HdrS")
	return b
}

// zImage is an ARM zImage header in the given byte order.
func zImage(order binary.ByteOrder) []byte {
	b := make([]byte, 0x400)
	order.PutUint32(b[0x24:], 0x016f2818)
	order.PutUint32(b[0x30:], 0x04030201)
	return b
}

func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// modulesTree writes lib/modules/VERSION under dir with a modules.dep
// listing mods (and their files) and builtin in modules.builtin.
func modulesTree(t *testing.T, dir, version string, mods, builtin []string) string {
	t.Helper()
	root := filepath.Join(dir, "lib", "modules", version)
	var dep, bl strings.Builder
	for _, m := range mods {
		rel := "kernel/drivers/" + m + ".ko"
		write(t, filepath.Join(root, rel), []byte("module "+m))
		fmt.Fprintf(&dep, "%s:\n", rel)
	}
	for _, b := range builtin {
		fmt.Fprintf(&bl, "kernel/crypto/%s.ko\n", b)
	}
	write(t, filepath.Join(root, "modules.dep"), []byte(dep.String()))
	write(t, filepath.Join(root, "modules.builtin"), []byte(bl.String()))
	return root
}

func allModules(p *plan.Plan) []string {
	var out []string
	for _, m := range p.Modules {
		if !m.OutOfTree {
			out = append(out, m.Name)
		}
	}
	return out
}

func without(s []string, drop ...string) []string {
	var out []string
	for _, x := range s {
		if !contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

const goodConfig = `CONFIG_BLK_DEV_INITRD=y
CONFIG_DEVTMPFS=y
CONFIG_RD_XZ=y
CONFIG_CRYPTO_USER_API=m
CONFIG_CRYPTO_USER_API_SKCIPHER=m
CONFIG_CRYPTO_USER_API_HASH=m
CONFIG_CRYPTO_USER=m
CONFIG_CRYPTO_DES=m
CONFIG_CRYPTO_DEV_GEODE=m
CONFIG_CRYPTO_DEV_IXP4XX=y
` + routerConfig

// routerConfig has the options of the ports' NICs and the router's modules,
// its tunnels' included.
const routerConfig = `CONFIG_VIA_RHINE=m
CONFIG_E1000=m
CONFIG_IXP4XX_ETH=y
CONFIG_CRYPTO_CRC32C=m
CONFIG_LIBCRC32C=m
CONFIG_NETFILTER_NETLINK=m
CONFIG_NF_TABLES=m
CONFIG_NFT_OBJREF=m
CONFIG_NF_DEFRAG_IPV4=m
CONFIG_NF_DEFRAG_IPV6=m
CONFIG_NF_CONNTRACK=m
CONFIG_NFT_CT=m
CONFIG_NF_NAT=m
CONFIG_NFT_NAT=m
CONFIG_NFT_MASQ=m
CONFIG_NFT_LIMIT=m
CONFIG_NFT_FIB=m
CONFIG_NFT_FIB_IPV4=m
CONFIG_NFT_FIB_IPV6=m
CONFIG_NFT_FIB_INET=m
CONFIG_BRIDGE=m
CONFIG_CRYPTO_CTR=m
CONFIG_CRYPTO_SHA512=m
CONFIG_CRYPTO_DRBG=m
CONFIG_CRYPTO_CBC=y
CONFIG_CRYPTO_HMAC=y
CONFIG_CRYPTO_SHA1=y
CONFIG_CRYPTO_SHA256=y
CONFIG_XFRM_ALGO=m
CONFIG_XFRM_USER=m
CONFIG_INET_ESP=m
CONFIG_INET6_ESP=m
CONFIG_CRYPTO_AUTHENC=m
CONFIG_CRYPTO_ECHAINIV=m
CONFIG_CRYPTO_SEQIV=m
`

// Each bad kernel input gives its own clear error; several problems come
// in one error.
func TestLoadKernelBadInputs(t *testing.T) {
	alix := resolvePlan(t, "alix2d13")
	nslu2 := resolvePlan(t, "nslu2")
	type setup func(t *testing.T, dir string) string
	tests := []struct {
		name  string
		plan  *plan.Plan
		setup setup
		want  []string // substrings of the error, all required
		count int      // problems in the *Error; 0 = not a Error
	}{
		{"ARM zImage for an x86 board", alix, func(t *testing.T, d string) string {
			write(t, filepath.Join(d, "zImage"), zImage(binary.LittleEndian))
			modulesTree(t, d, "6.1.0-test", allModules(alix), nil)
			return d
		}, []string{"is an ARM (zImage) kernel, but board alix2d13 needs an x86 (bzImage) kernel"}, 1},
		{"x86 bzImage for an ARM board", nslu2, func(t *testing.T, d string) string {
			img := write(t, filepath.Join(d, "vmlinuz"), bzImage())
			mods := modulesTree(t, d, "6.1.0-test", allModules(nslu2), nil)
			return img + ":" + mods
		}, []string{"x86 (bzImage) kernel, but board nslu2 needs an ARM (zImage) kernel"}, 1},
		{"big-endian ARM kernel", nslu2, func(t *testing.T, d string) string {
			img := write(t, filepath.Join(d, "zImage"), zImage(binary.BigEndian))
			mods := modulesTree(t, d, "6.1.0-test", allModules(nslu2), nil)
			return img + ":" + mods
		}, []string{"big-endian ARM kernel", "Go has no big-endian ARM port"}, 1},
		{"planned modules missing, all listed", alix, func(t *testing.T, d string) string {
			write(t, filepath.Join(d, "vmlinuz"), bzImage())
			modulesTree(t, d, "6.1.0-test", []string{"af_alg"}, nil)
			return d
		}, []string{"planned kernel modules missing", "algif_skcipher", "algif_hash", "des_generic", "geode_aes"}, 1},
		{"config lacks AF_ALG options", alix, func(t *testing.T, d string) string {
			write(t, filepath.Join(d, "vmlinuz"), bzImage())
			modulesTree(t, d, "6.1.0-test", allModules(alix), nil)
			write(t, filepath.Join(d, "config"), []byte("CONFIG_BLK_DEV_INITRD=y\nCONFIG_DEVTMPFS=y\nCONFIG_RD_XZ=y\nCONFIG_CRYPTO_USER_API=m\nCONFIG_CRYPTO_USER=m\nCONFIG_CRYPTO_DES=m\nCONFIG_CRYPTO_DEV_GEODE=m\n"+routerConfig))
			return d
		}, []string{"CONFIG_CRYPTO_USER_API_SKCIPHER is not set", "CONFIG_CRYPTO_USER_API_HASH is not set"}, 2},
		{"everything wrong at once", alix, func(t *testing.T, d string) string {
			write(t, filepath.Join(d, "zImage"), zImage(binary.LittleEndian))
			modulesTree(t, d, "6.1.0-test", []string{"af_alg"}, nil)
			write(t, filepath.Join(d, "config"), []byte("CONFIG_DEVTMPFS=y\n"))
			return d
		}, []string{"3", "ARM (zImage)", "CONFIG_BLK_DEV_INITRD", "CONFIG_CRYPTO_DEV_GEODE", "geode_aes"}, -1},
		{"not a kernel image", alix, func(t *testing.T, d string) string {
			write(t, filepath.Join(d, "vmlinuz"), []byte("#!/bin/sh\necho hello\n"))
			modulesTree(t, d, "6.1.0-test", allModules(alix), nil)
			return d
		}, []string{"neither an x86 bzImage nor an ARM zImage"}, 1},
		{"U-Boot uImage", nslu2, func(t *testing.T, d string) string {
			b := make([]byte, 64)
			binary.BigEndian.PutUint32(b, 0x27051956)
			return write(t, filepath.Join(d, "uImage"), b) + ":" + modulesTree(t, d, "6.1.0-test", allModules(nslu2), nil)
		}, []string{"U-Boot uImage", "give the zImage"}, 1},
		{"truncated .deb", alix, func(t *testing.T, d string) string {
			deb := kernelDeb(t, "6.1.0-test", allModules(alix))
			return write(t, filepath.Join(d, "linux-image-test.deb"), deb[:len(deb)*2/3])
		}, []string{"truncated", debian.ErrFormat.Error()}, 0},
		{"no such file", alix, func(t *testing.T, d string) string {
			return filepath.Join(d, "nope")
		}, []string{"no such file or directory", "IMAGE:MODULESDIR"}, 0},
		{"directory without a kernel", alix, func(t *testing.T, d string) string {
			modulesTree(t, d, "6.1.0-test", allModules(alix), nil)
			return d
		}, []string{"no vmlinuz, bzImage, zImage"}, 0},
		{"modules dir with two versions", nslu2, func(t *testing.T, d string) string {
			modulesTree(t, d, "6.1.0-a", allModules(nslu2), nil)
			modulesTree(t, d, "6.1.0-b", allModules(nslu2), nil)
			return write(t, filepath.Join(d, "zImage"), zImage(binary.LittleEndian)) + ":" + d
		}, []string{"several kernel versions", "6.1.0-a", "6.1.0-b"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.setup(t, t.TempDir())
			k, err := Load(context.Background(), tc.plan, spec, t.TempDir())
			if err == nil {
				t.Fatalf("Load(%s) = %+v, want an error", spec, k)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			t.Logf("%v", err)
			var ke *Error
			switch {
			case tc.count == 0 && errors.As(err, &ke):
				t.Errorf("got a *Error, want an input error: %v", err)
			case tc.count > 0 && (!errors.As(err, &ke) || len(ke.Problems) != tc.count):
				t.Errorf("want a *Error with %d problem(s), got %#v", tc.count, err)
			case tc.count < 0 && (!errors.As(err, &ke) || len(ke.Problems) < 3):
				t.Errorf("want a *Error with all problems at once, got %#v", err)
			}
		})
	}
}

// Good inputs in each accepted form load, and config =y marks built-in
// modules.
func TestLoadKernelForms(t *testing.T) {
	alix := resolvePlan(t, "alix2d13")
	nslu2 := resolvePlan(t, "nslu2")
	t.Run("flat directory", func(t *testing.T) {
		d := t.TempDir()
		write(t, filepath.Join(d, "bzImage"), bzImage())
		modulesTree(t, d, "6.1.0-test", allModules(alix), nil)
		write(t, filepath.Join(d, "config"), []byte(goodConfig))
		k, err := Load(context.Background(), alix, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if k.Arch != ArchX86 || k.Version != "6.1.0-test" || k.Config == "" || len(k.SHA256) != 64 {
			t.Errorf("kernel %+v", k)
		}
	})
	t.Run("without the optional aes_ti", func(t *testing.T) {
		d := t.TempDir()
		write(t, filepath.Join(d, "bzImage"), bzImage())
		modulesTree(t, d, "6.1.0-test", without(allModules(alix), "aes_ti"), nil)
		write(t, filepath.Join(d, "config"), []byte(goodConfig))
		k, err := Load(context.Background(), alix, d, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if !contains(k.Absent, "aes_ti") {
			t.Errorf("absent %v, want aes_ti", k.Absent)
		}
	})
	t.Run("zImage:modules with a built-in driver", func(t *testing.T) {
		d := t.TempDir()
		img := write(t, filepath.Join(d, "zImage"), zImage(binary.LittleEndian))
		mods := modulesTree(t, d, "6.1.0-ixp", without(allModules(nslu2), "ixp4xx_crypto"), nil)
		// The board's own options from its fragment; goodConfig's
		// CONFIG_CRYPTO_DEV_IXP4XX=y, read later, builds the driver in.
		cfg := write(t, filepath.Join(d, "config"), []byte(Fragment(nslu2, nil)+goodConfig))
		k, err := Load(context.Background(), nslu2, img+":"+mods+":"+cfg, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if k.Arch != ArchARM || k.Version != "6.1.0-ixp" || !contains(k.Builtin, "ixp4xx_crypto") {
			t.Errorf("kernel %+v", k)
		}
	})
	t.Run("gzip config", func(t *testing.T) {
		d := t.TempDir()
		write(t, filepath.Join(d, "vmlinuz"), bzImage())
		modulesTree(t, d, "6.1.0-test", allModules(alix), nil)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte(goodConfig))
		zw.Close()
		write(t, filepath.Join(d, "config.gz"), gz.Bytes())
		if _, err := Load(context.Background(), alix, d, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run(".deb", func(t *testing.T) {
		d := t.TempDir()
		deb := write(t, filepath.Join(d, "linux-image-test.deb"), kernelDeb(t, "6.1.0-test", allModules(alix)))
		k, err := Load(context.Background(), alix, deb, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if k.Version != "6.1.0-test" || k.Source != deb || k.ModulesDir == "" {
			t.Errorf("kernel %+v", k)
		}
	})
	t.Run("board without a Debian kernel", func(t *testing.T) {
		_, err := Load(context.Background(), nslu2, "", t.TempDir())
		var nk *NoKernelError
		if !errors.As(err, &nk) || nk.Board != "nslu2" || strings.Contains(strings.TrimSuffix(err.Error(), " ("+nk.Note+")"), "--") {
			t.Errorf("err = %v, want a NoKernelError for nslu2 naming no flag", err)
		}
	})
}

// The real Debian kernel fits the Geode boards and is refused for IXP4xx.
func TestDebianKernel(t *testing.T) {
	alix := resolvePlan(t, "alix2d13")
	deb, err := debian.CachedKernel(alix.Kernel.Package, alix.Kernel.Arch, "")
	if err != nil {
		labtest.SkipOrFail(t, "kernel package not cached (`ocfw kernel fetch --board alix2d13`): %v", err)
	}
	k, err := Load(context.Background(), alix, deb, "")
	if err != nil {
		t.Fatal(err)
	}
	if k.Arch != ArchX86 || k.Config == "" || !strings.HasSuffix(k.Version, "-686") {
		t.Errorf("kernel %+v", k)
	}
	_, err = Load(context.Background(), resolvePlan(t, "nslu2"), deb, "")
	if err == nil || !strings.Contains(err.Error(), "needs an ARM (zImage) kernel") {
		t.Errorf("nslu2 with the 686 kernel: %v", err)
	}
}

// IdentifyImage tells the zImage byte orders apart, flag or no flag.
func TestIdentifyImage(t *testing.T) {
	noFlag := func(order binary.ByteOrder) []byte {
		b := make([]byte, 0x40)
		order.PutUint32(b[0x24:], 0x016f2818)
		return b
	}
	tests := []struct {
		name string
		data []byte
		want ImageInfo
	}{
		{"bzImage", bzImage(), ImageInfo{Arch: ArchX86}},
		{"zImage LE", zImage(binary.LittleEndian), ImageInfo{Arch: ArchARM}},
		{"zImage BE", zImage(binary.BigEndian), ImageInfo{Arch: ArchARM, BigEndian: true}},
		{"zImage LE without flag", noFlag(binary.LittleEndian), ImageInfo{Arch: ArchARM}},
		{"zImage BE without flag", noFlag(binary.BigEndian), ImageInfo{Arch: ArchARM, BigEndian: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IdentifyImage(write(t, filepath.Join(t.TempDir(), "img"), tc.data))
			if err != nil || got != tc.want {
				t.Errorf("IdentifyImage = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := IdentifyImage(write(t, filepath.Join(t.TempDir(), "short"), []byte{1, 2, 3})); err == nil {
		t.Error("a 3-byte file identified as a kernel")
	}
}

// kernelDeb builds a minimal linux-image .deb: ar with debian-binary,
// control.tar.gz and data.tar.gz holding boot/vmlinuz-V, config-V and
// lib/modules/V with mods.
func kernelDeb(t *testing.T, version string, mods []string) []byte {
	t.Helper()
	files := map[string][]byte{
		"./boot/vmlinuz-" + version: bzImage(),
		"./boot/config-" + version:  []byte(goodConfig),
	}
	var dep strings.Builder
	for _, m := range mods {
		rel := "kernel/drivers/" + m + ".ko"
		files["./lib/modules/"+version+"/"+rel] = []byte("module " + m)
		fmt.Fprintf(&dep, "%s:\n", rel)
	}
	files["./lib/modules/"+version+"/modules.dep"] = []byte(dep.String())
	tgz := func(files map[string][]byte) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		tw := tar.NewWriter(zw)
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		dirs := map[string]bool{}
		for _, n := range names {
			for d := filepath.Dir(n); d != "." && !dirs[d]; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
		var dl []string
		for d := range dirs {
			dl = append(dl, d)
		}
		sort.Strings(dl)
		for _, d := range dl {
			tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755})
		}
		for _, n := range names {
			tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))})
			tw.Write(files[n])
		}
		tw.Close()
		zw.Close()
		return b.Bytes()
	}
	var ar bytes.Buffer
	ar.WriteString("!<arch>\n")
	member := func(name string, data []byte) {
		fmt.Fprintf(&ar, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, 0, 0, 0, "100644", len(data))
		ar.Write(data)
		if len(data)%2 == 1 {
			ar.WriteByte('\n')
		}
	}
	member("debian-binary", []byte("2.0\n"))
	member("control.tar.gz", tgz(map[string][]byte{"./control": []byte("Package: linux-image-test\n")}))
	member("data.tar.gz", tgz(files))
	return ar.Bytes()
}
