// Package kernel finds the board's kernel (a Debian package, a directory
// or an image plus modules), checks it against the plan, and says what a
// kernel the owner builds must have (Needs, Fragment): every problem at
// once, as facts the CLI words for its flags.
package kernel

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ocfw/ocfw/internal/debian"
	"github.com/ocfw/ocfw/plan"
)

// Kernel is the kernel a firmware boots, as Load found and checked it.
type Kernel struct {
	Version    string // "6.1.0-57-686"; "" when no modules directory was given
	Image      string // path of the bzImage or zImage
	Arch       string // "x86" or "arm", from the image itself
	ModulesDir string // .../lib/modules/VERSION, "" when none was given
	Config     string // path of the kernel config (plain or gzip), "" when none
	// DTB is the device tree a QEMU stand-in boots the kernel with
	// (plan.StandIn), from the kernel package; "" for a board.
	DTB    string
	dtbDir string // the package's device trees, when it has them
	Source string // what the user gave (or the cached .deb)
	SHA256 string // of Source when it is a file, else of Image

	// Builtin are planned modules the kernel has built in (no file to load).
	Builtin []string
	// Absent are out-of-tree (OCF) or optional (aes_ti) planned modules
	// this kernel lacks: the firmware reports their engines absent, or
	// does without, rather than failing.
	Absent []string
}

// Kernel image architectures.
const (
	ArchX86 = "x86"
	ArchARM = "arm"
)

// Error lists every problem with a kernel input at once, so a user
// fixes them in one round rather than one per run.
type Error struct {
	Source   string
	Problems []string
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("kernel %s: %s", e.Source, e.Problems[0])
	}
	return fmt.Sprintf("kernel %s has %d problems:\n  - %s", e.Source, len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// Load finds the kernel for plan and checks it. spec is:
//
//   - "": the plan's Debian package (plan.Kernel.Package for
//     plan.Kernel.Arch), from cacheDir, fetched with apt-get if missing;
//   - a Debian linux-image .deb;
//   - a directory holding vmlinuz, bzImage or zImage (or boot/vmlinuz-V)
//     and lib/modules/VERSION, with an optional config, .config,
//     config.gz or boot/config-V;
//   - IMAGE:MODULES, a kernel image file and a modules directory (either
//     lib/modules/VERSION itself or a directory containing it) — the form
//     for IXP4xx zImages with an appended device tree. IMAGE alone is a
//     kernel with everything built in.
//
// A config file beside the image is used as IMAGE:MODULES:CONFIG.
// cacheDir "" means the default cache. The checks (architecture,
// endianness, config options, planned modules) report every problem in
// one *Error.
func Load(ctx context.Context, pl *plan.Plan, spec, cacheDir string) (*Kernel, error) {
	if pl == nil {
		return nil, errors.New("rootfs: no plan")
	}
	k, err := findKernel(ctx, pl, spec, cacheDir)
	if err != nil {
		return nil, err
	}
	if err := k.check(pl); err != nil {
		return nil, err
	}
	return k, nil
}

// NoKernelError is a board without a Debian kernel package given no
// kernel: the user must give one. Note is the profile's word on it.
type NoKernelError struct {
	Board string
	Note  string
}

func (e *NoKernelError) Error() string {
	msg := "board " + e.Board + " has no Debian kernel package: give its kernel"
	if e.Note != "" {
		msg += " (" + e.Note + ")"
	}
	return msg
}

// SpecError is a kernel given (Load's spec) that is not a usable one.
type SpecError struct {
	Spec string
	Err  error
}

func (e *SpecError) Error() string { return "kernel " + e.Spec + ": " + e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

func findKernel(ctx context.Context, pl *plan.Plan, spec, cacheDir string) (*Kernel, error) {
	if spec == "" {
		if pl.Kernel.Source != "debian" || pl.Kernel.Package == "" {
			return nil, &NoKernelError{Board: pl.Board, Note: pl.Kernel.Note}
		}
		deb, err := debian.FetchKernel(ctx, pl.Kernel.Package, pl.Kernel.Arch, cacheDir)
		if err != nil {
			return nil, fmt.Errorf("kernel package %s (%s): %w", pl.Kernel.Package, pl.Kernel.Arch, err)
		}
		return fromDeb(deb, cacheDir)
	}
	if fi, err := os.Stat(spec); err == nil {
		if fi.IsDir() {
			return fromDir(spec)
		}
		if isDeb(spec) {
			return fromDeb(spec, cacheDir)
		}
		return fromParts(spec, spec, "", "")
	}
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, &SpecError{Spec: spec, Err: errors.New("no such file or directory (want a .deb, a directory, or IMAGE:MODULESDIR[:CONFIG])")}
	}
	cfg := ""
	if len(parts) == 3 {
		cfg = parts[2]
	}
	return fromParts(spec, parts[0], parts[1], cfg)
}

func isDeb(name string) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 8)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "!<arch>\n" || strings.HasSuffix(name, ".deb")
}

func fromDeb(deb, cacheDir string) (*Kernel, error) {
	dk, err := debian.ExtractKernelCached(deb, cacheDir)
	if err != nil {
		return nil, fmt.Errorf("kernel package %s: %w", deb, err)
	}
	sum, err := fileSHA256(deb)
	if err != nil {
		return nil, err
	}
	return &Kernel{Version: dk.Version, Image: dk.Vmlinuz, ModulesDir: dk.ModulesDir, Config: dk.Config, Source: deb, SHA256: sum, dtbDir: dk.DTBDir}, nil
}

// fromDir accepts the Debian layout (boot/vmlinuz-V, lib/modules/V) or a
// flat one (vmlinuz|bzImage|zImage, lib/modules/V, config).
func fromDir(dir string) (*Kernel, error) {
	if dk, err := debian.OpenKernelDir(dir); err == nil {
		sum, err := fileSHA256(dk.Vmlinuz)
		if err != nil {
			return nil, err
		}
		return &Kernel{Version: dk.Version, Image: dk.Vmlinuz, ModulesDir: dk.ModulesDir, Config: dk.Config, Source: dir, SHA256: sum, dtbDir: dk.DTBDir}, nil
	}
	var image string
	for _, n := range []string{"vmlinuz", "bzImage", "zImage"} {
		if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			image = filepath.Join(dir, n)
			break
		}
	}
	if image == "" {
		return nil, &SpecError{Spec: dir, Err: errors.New("no vmlinuz, bzImage, zImage or boot/vmlinuz-VERSION in the directory")}
	}
	mods := ""
	if _, err := os.Stat(filepath.Join(dir, "lib", "modules")); err == nil {
		mods = dir
	}
	cfg := ""
	for _, n := range []string{"config", ".config", "config.gz"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			cfg = filepath.Join(dir, n)
			break
		}
	}
	return fromParts(dir, image, mods, cfg)
}

// fromParts builds a Kernel from an image, a modules directory (V itself or
// a directory with lib/modules/V) and a config.
func fromParts(source, image, mods, cfg string) (*Kernel, error) {
	if fi, err := os.Stat(image); err != nil || !fi.Mode().IsRegular() {
		return nil, &SpecError{Spec: source, Err: fmt.Errorf("kernel image %s: not a file", image)}
	}
	k := &Kernel{Image: image, Source: source, Config: cfg}
	if mods != "" {
		dir, err := modulesDir(mods)
		if err != nil {
			return nil, &SpecError{Spec: source, Err: err}
		}
		k.ModulesDir, k.Version = dir, filepath.Base(dir)
	}
	if cfg != "" {
		if _, err := os.Stat(cfg); err != nil {
			return nil, &SpecError{Spec: source, Err: fmt.Errorf("kernel config: %w", err)}
		}
	}
	sum, err := fileSHA256(image)
	if err != nil {
		return nil, err
	}
	k.SHA256 = sum
	return k, nil
}

// modulesDir finds lib/modules/VERSION from what a user gave.
func modulesDir(d string) (string, error) {
	if _, err := os.Stat(filepath.Join(d, "modules.dep")); err == nil {
		return filepath.Clean(d), nil
	}
	for _, sub := range []string{"lib/modules", "usr/lib/modules", "."} {
		es, err := os.ReadDir(filepath.Join(d, sub))
		if err != nil {
			continue
		}
		var vs []string
		for _, e := range es {
			if e.IsDir() {
				if _, err := os.Stat(filepath.Join(d, sub, e.Name(), "modules.dep")); err == nil {
					vs = append(vs, e.Name())
				} else if sub != "." {
					vs = append(vs, e.Name())
				}
			}
		}
		switch len(vs) {
		case 0:
			continue
		case 1:
			return filepath.Join(d, sub, vs[0]), nil
		default:
			return "", fmt.Errorf("modules directory %s holds several kernel versions (%s): name one", d, strings.Join(vs, ", "))
		}
	}
	return "", fmt.Errorf("modules directory %s: no modules.dep and no lib/modules/VERSION in it", d)
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ImageInfo is what the first bytes of a kernel image say.
type ImageInfo struct {
	Arch      string // ArchX86 or ArchARM
	BigEndian bool   // ARM only
}

// zImage header fields (arch/arm/boot/compressed/head.S): the magic word
// at 0x24, the endianness flag word 0x04030201 at 0x30 — stored in the
// kernel's own byte order, so its bytes tell the order apart.
const (
	zImageMagic     = 0x016f2818
	zImageMagicOff  = 0x24
	zImageEndianOff = 0x30
	ubootMagic      = 0x27051956
)

// IdentifyImage reads a kernel image's header: an x86 bzImage ("HdrS" at
// 0x202 after the 0x55AA boot signature) or an ARM zImage (magic at 0x24,
// in either byte order).
func IdentifyImage(name string) (ImageInfo, error) {
	f, err := os.Open(name)
	if err != nil {
		return ImageInfo{}, err
	}
	defer f.Close()
	hdr := make([]byte, 0x210)
	n, _ := io.ReadFull(f, hdr)
	hdr = hdr[:n]
	if len(hdr) >= 0x206 && hdr[0x1fe] == 0x55 && hdr[0x1ff] == 0xaa && string(hdr[0x202:0x206]) == "HdrS" {
		return ImageInfo{Arch: ArchX86}, nil
	}
	if len(hdr) >= zImageEndianOff+4 {
		le := binary.LittleEndian.Uint32(hdr[zImageMagicOff:])
		be := binary.BigEndian.Uint32(hdr[zImageMagicOff:])
		if le == zImageMagic || be == zImageMagic {
			flag := hdr[zImageEndianOff : zImageEndianOff+4]
			switch {
			case bytes.Equal(flag, []byte{1, 2, 3, 4}):
				return ImageInfo{Arch: ArchARM}, nil
			case bytes.Equal(flag, []byte{4, 3, 2, 1}):
				return ImageInfo{Arch: ArchARM, BigEndian: true}, nil
			}
			// Older zImages have no flag: the magic's order is the kernel's.
			return ImageInfo{Arch: ArchARM, BigEndian: be == zImageMagic && le != zImageMagic}, nil
		}
	}
	if len(hdr) >= 4 && binary.BigEndian.Uint32(hdr) == ubootMagic {
		return ImageInfo{}, fmt.Errorf("%s is a U-Boot uImage; give the zImage inside it (RedBoot loads a zImage)", name)
	}
	return ImageInfo{}, fmt.Errorf("%s is neither an x86 bzImage nor an ARM zImage (no boot header found)", name)
}

// imageArch is the kernel image architecture a plan's Go target needs.
func imageArch(p *plan.Plan) string {
	if p.Go.GOARCH == "arm" {
		return ArchARM
	}
	return ArchX86
}

// configSymbols maps module names to the config options that build them;
// a module whose option is =y is built in.
var configSymbols = map[string]string{
	"af_alg":         "CONFIG_CRYPTO_USER_API",
	"algif_skcipher": "CONFIG_CRYPTO_USER_API_SKCIPHER",
	"algif_hash":     "CONFIG_CRYPTO_USER_API_HASH",
	"des_generic":    "CONFIG_CRYPTO_DES",
	"crypto_user":    "CONFIG_CRYPTO_USER",
	"aes_ti":         "CONFIG_CRYPTO_AES_TI",
	"geode_aes":      "CONFIG_CRYPTO_DEV_GEODE",
	"hifn_795x":      "CONFIG_CRYPTO_DEV_HIFN_795X",
	"ixp4xx_crypto":  "CONFIG_CRYPTO_DEV_IXP4XX",
	// The ports and the router.
	"via_rhine":      "CONFIG_VIA_RHINE",
	"e1000":          "CONFIG_E1000",
	"ixp4xx_eth":     "CONFIG_IXP4XX_ETH",
	"crc32c_generic": "CONFIG_CRYPTO_CRC32C",
	"libcrc32c":      "CONFIG_LIBCRC32C",
	"nft_objref":     "CONFIG_NFT_OBJREF",
	"nf_defrag_ipv4": "CONFIG_NF_DEFRAG_IPV4",
	"nf_defrag_ipv6": "CONFIG_NF_DEFRAG_IPV6",
	"nf_conntrack":   "CONFIG_NF_CONNTRACK",
	"nf_nat":         "CONFIG_NF_NAT",
	"nfnetlink":      "CONFIG_NETFILTER_NETLINK",
	"nf_tables":      "CONFIG_NF_TABLES",
	"nft_ct":         "CONFIG_NFT_CT",
	"nft_chain_nat":  "CONFIG_NFT_NAT",
	"nft_nat":        "CONFIG_NFT_NAT",
	"nft_masq":       "CONFIG_NFT_MASQ",
	"nft_limit":      "CONFIG_NFT_LIMIT",
	"nft_fib":        "CONFIG_NFT_FIB",
	"nft_fib_ipv4":   "CONFIG_NFT_FIB_IPV4",
	"nft_fib_ipv6":   "CONFIG_NFT_FIB_IPV6",
	"nft_fib_inet":   "CONFIG_NFT_FIB_INET",
	"bridge":         "CONFIG_BRIDGE",
	// IPsec tunnels (drivers.TunnelModules).
	"ctr":            "CONFIG_CRYPTO_CTR",
	"sha512_generic": "CONFIG_CRYPTO_SHA512",
	"drbg":           "CONFIG_CRYPTO_DRBG",
	"cbc":            "CONFIG_CRYPTO_CBC",
	"hmac":           "CONFIG_CRYPTO_HMAC",
	"sha1_generic":   "CONFIG_CRYPTO_SHA1",
	"sha256_generic": "CONFIG_CRYPTO_SHA256",
	"xfrm_algo":      "CONFIG_XFRM_ALGO",
	"xfrm_user":      "CONFIG_XFRM_USER",
	"esp4":           "CONFIG_INET_ESP",
	"esp6":           "CONFIG_INET6_ESP",
	"authenc":        "CONFIG_CRYPTO_AUTHENC",
	"authencesn":     "CONFIG_CRYPTO_AUTHENC",
	"echainiv":       "CONFIG_CRYPTO_ECHAINIV",
	"seqiv":          "CONFIG_CRYPTO_SEQIV",
}

// ReadConfig parses a kernel config (plain, or gzip like /proc/config.gz)
// into option → value ("y", "m", a string); unset options are absent.
func ReadConfig(name string) (map[string]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("kernel config %s: %w", name, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("kernel config %s: %w", name, err)
		}
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	lines := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = strings.Trim(v, `"`)
			lines++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("kernel config %s: %w", name, err)
	}
	if lines == 0 {
		return nil, fmt.Errorf("kernel config %s: no CONFIG_ lines: not a kernel config", name)
	}
	return cfg, nil
}

// check collects every problem with k for plan p.
func (k *Kernel) check(p *plan.Plan) error {
	var problems []string
	info, err := IdentifyImage(k.Image)
	switch {
	case err != nil:
		problems = append(problems, err.Error())
	case info.Arch != imageArch(p):
		problems = append(problems, fmt.Sprintf("kernel image %s is an %s kernel, but board %s needs an %s kernel",
			k.Image, archName(info.Arch), p.Board, archName(imageArch(p))))
	case info.BigEndian:
		problems = append(problems, fmt.Sprintf("kernel image %s is a big-endian ARM kernel: the firmware's Go userland runs only on "+
			"little-endian ARM (Go has no big-endian ARM port); build the kernel little-endian (CONFIG_CPU_BIG_ENDIAN not set)", k.Image))
	default:
		k.Arch = info.Arch
	}

	var cfg map[string]string
	if k.Config != "" {
		if cfg, err = ReadConfig(k.Config); err != nil {
			problems = append(problems, err.Error())
		} else {
			for _, n := range Needs(p) {
				if !n.Optional && !n.Met(cfg) {
					problems = append(problems, fmt.Sprintf("kernel config %s: %s (%s)", k.Config, needProblem(n, cfg), n.Why))
				}
			}
		}
	}
	problems = append(problems, k.versionProblems(p, cfg)...)

	if p.StandIn != nil {
		k.DTB = ""
		if k.dtbDir == "" {
			problems = append(problems, fmt.Sprintf("the QEMU stand-in %s boots Debian's %s package with its device tree %s; this kernel comes with no device trees",
				p.StandIn.Machine, p.Kernel.Package, p.StandIn.DTB))
		} else if dtb := filepath.Join(k.dtbDir, p.StandIn.DTB); !isFile(dtb) {
			problems = append(problems, fmt.Sprintf("the QEMU stand-in %s needs the device tree %s, which %s lacks", p.StandIn.Machine, p.StandIn.DTB, k.dtbDir))
		} else {
			k.DTB = dtb
		}
	}

	k.Builtin, k.Absent = nil, nil
	var want []string
	for _, m := range p.Modules {
		if sym, ok := configSymbols[m.Name]; ok && cfg[sym] == "y" {
			k.Builtin = append(k.Builtin, m.Name)
			continue
		}
		want = append(want, m.Name)
	}
	if len(want) > 0 {
		if k.ModulesDir == "" {
			var inTree []string
			for _, m := range p.Modules {
				if contains(want, m.Name) && !m.OutOfTree && !m.Optional {
					inTree = append(inTree, m.Name)
				} else if contains(want, m.Name) {
					k.Absent = append(k.Absent, m.Name)
				}
			}
			if len(inTree) > 0 {
				problems = append(problems, fmt.Sprintf("no modules directory given, and the plan's modules %s are not built in (by the config)", strings.Join(inTree, ", ")))
			}
		} else if idx, err := debian.LoadModuleIndex(k.ModulesDir); err != nil {
			problems = append(problems, err.Error())
		} else {
			var missing []string
			for _, m := range p.Modules {
				if !contains(want, m.Name) {
					continue
				}
				_, builtin, err := idx.Closure(m.Name)
				var mm *debian.MissingModulesError
				switch {
				case errors.As(err, &mm) && (m.OutOfTree || m.Optional):
					k.Absent = append(k.Absent, m.Name)
				case errors.As(err, &mm):
					missing = append(missing, mm.Missing...)
				case err != nil:
					problems = append(problems, err.Error())
				case len(builtin) > 0 && builtin[len(builtin)-1] == m.Name:
					k.Builtin = append(k.Builtin, m.Name)
				}
			}
			if len(missing) > 0 {
				problems = append(problems, fmt.Sprintf("planned kernel modules missing from %s (neither a .ko nor in modules.builtin): %s",
					k.ModulesDir, strings.Join(dedupe(missing), ", ")))
			}
		}
	}
	if len(problems) > 0 {
		return &Error{Source: k.Source, Problems: problems}
	}
	return nil
}

func isFile(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}

func archName(a string) string {
	switch a {
	case ArchX86:
		return "x86 (bzImage)"
	case ArchARM:
		return "ARM (zImage)"
	}
	return a
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
