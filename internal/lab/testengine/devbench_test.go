package testengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/kbuild"
	"github.com/ocfw/ocfw/internal/lab/kerneltest"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/internal/lab/qemu"
	"github.com/ocfw/ocfw/internal/lab/refspeed"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/afalg"
	"github.com/ocfw/ocfw/ocf/cryptodev"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/ocf/speed"
)

// softAESDriver is the kernel's software cbc(aes) on Debian's 686
// kernel (aes-generic is built in), the seeds' "kernel software" column.
const softAESDriver = "cbc(aes-generic)"

// devCryptoSizes are tests/speed's chunk sizes: 512 to 64 KiB.
var devCryptoSizes = []int{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}

// TestBenchDevCrypto is bench/run's devcrypto section, the seeds' own
// method in one boot of Debian's 686 kernel with both stand-in engines
// and /dev/crypto: Debian's i386 `openssl speed -engine afalg` beside
// ocf speed through AF_ALG, and cryptodev-linux's tests/speed beside ocf
// speed through /dev/crypto, on each kernel driver of cbc(aes) in turn.
// Only with OCFW_DEVCRYPTO_BENCH=ROUNDS set: a benchmark, run by hand.
//
// The programs reach the guest as trees appended to its initramfs
// (kerneltest.Options.Trees): the openssl tree as worldvm unpacks
// strongSwan's, run by its own loader, and tests/speed linked
// statically.
func TestBenchDevCrypto(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv(refspeed.EnvBench))
	if rounds < 1 || kerneltest.InGuest() {
		t.Skip("bench/run's devcrypto section: set " + refspeed.EnvBench + "=ROUNDS")
	}
	if testing.Short() {
		t.Skip("boots the kernel in QEMU for minutes; skipped with -short")
	}
	if err := qemu.Installed("i386"); err != nil {
		labtest.SkipOrFail(t, "the devcrypto benchmark not booted: %v", err)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		labtest.SkipOrFail(t, "fetching Debian's i386 openssl needs apt-get: %v", err)
	}
	ctx := context.Background()
	tree, err := refspeed.FetchOpenSSL(ctx, "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refspeed.AFALGEngine(tree.Dir); err != nil {
		t.Fatal(err)
	}
	bin, err := refspeed.BuildSpeed(ctx, refspeed.SpeedOptions{Source: labtest.SharedDep(t, kbuild.CryptodevSource), Log: t.Logf})
	if errors.Is(err, refspeed.ErrNoToolchain) {
		labtest.SkipOrFail(t, "cryptodev-linux's tests/speed not built: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	extra := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(extra, strings.TrimPrefix(refspeed.SpeedGuestPath, "/"))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// openssl speed's own default: its first size's window also holds
	// the engine's setup (binding, setkey), which takes over a second
	// under TCG on a loaded host: with -seconds 1 it counted 0
	// operations in 0 s (a figure of -nan).
	secs := os.Getenv(refspeed.EnvSeconds)
	if secs == "" {
		secs = "3"
	}
	mod := buildOrSkip(t, Options{Log: t.Logf})
	vc, _ := catalog.LookupEngine(catalog.VirtioCrypto)
	res := kerneltest.Run(t, kerneltest.Options{
		Modules:     guestModules(),
		ModuleFiles: []string{mod.Path, devCryptoModule(t)},
		QEMUArgs:    vc.QEMU,
		Run:         "^TestGuestBenchDevCrypto$",
		Env:         map[string]string{refspeed.EnvBench: strconv.Itoa(rounds), refspeed.EnvSeconds: secs},
		Trees:       []string{tree.Dir, extra},
		MemoryMB:    512,
		// A round is about 9 minutes of fixed-length measurements at 3 s a
		// cell (tests/speed alone takes 80 s per engine); the rest is a
		// loaded host's boot.
		Timeout: time.Duration(rounds)*15*time.Minute + 5*time.Minute,
	})
	if _, err := refspeed.ParseResult(res.Output); err != nil {
		t.Error(err)
	}
}

// TestGuestBenchDevCrypto is the guest side of TestBenchDevCrypto; it
// prints a refspeed.Result line.
func TestGuestBenchDevCrypto(t *testing.T) {
	guestOnly(t)
	rounds, _ := strconv.Atoi(os.Getenv(refspeed.EnvBench))
	if rounds < 1 {
		t.Skip("only in TestBenchDevCrypto's boot")
	}
	secs, err := strconv.Atoi(os.Getenv(refspeed.EnvSeconds))
	if err != nil || secs < 1 {
		t.Fatalf("%s=%q: want whole seconds >= 1", refspeed.EnvSeconds, os.Getenv(refspeed.EnvSeconds))
	}
	engines, err := refspeed.AFALGEngine("/")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LD_LIBRARY_PATH="+refspeed.LibraryPath, "OPENSSL_ENGINES="+engines, "OPENSSL_CONF="+refspeed.OpenSSLConf)
	version, _ := runTool(t, env, refspeed.OpenSSL, "version")
	res := refspeed.Result{OpenSSL: strings.TrimSpace(version), Rounds: rounds, Seconds: float64(secs)}
	if u, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Kernel = strings.TrimSpace(string(u))
	}
	dur := time.Duration(secs) * time.Second
	openssl := func(args ...string) map[int]float64 {
		t.Helper()
		var err error
		// A size whose window the engine's setup used up entirely
		// reads as -nan: run again (twice at most).
		for range 3 {
			out, errOut := runTool(t, env, refspeed.OpenSSL, append([]string{"speed", "-mr", "-elapsed", "-seconds", strconv.Itoa(secs)}, args...)...)
			// openssl speed goes on in software when the engine does
			// not load ("Invalid engine"), exiting 0.
			if args[0] == "-engine" && !strings.Contains(out+errOut, `Engine "afalg" set.`) {
				t.Fatalf("openssl %s: the afalg engine was not set:\n%s%s", strings.Join(args, " "), out, errOut)
			}
			var m map[int]float64
			if m, err = refspeed.ParseOpenSSL(out); err == nil {
				return m
			}
			t.Logf("openssl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			if !strings.Contains(err.Error(), "nan") {
				break
			}
		}
		t.Fatalf("openssl %s: %v", strings.Join(args, " "), err)
		return nil
	}
	ocfSpeed := func(d ocf.Driver, cipher string, sizes []int) map[int]float64 {
		t.Helper()
		row := speed.Measure(d, cipher, speed.Options{Duration: dur, Sizes: sizes})
		if row.Err != "" {
			t.Fatalf("ocf speed %s %s: %s", d.Name(), cipher, row.Err)
		}
		m := map[int]float64{}
		for _, c := range row.Cells {
			m[c.Size] = c.KBps / 1000
		}
		return m
	}
	// The kernel's software cbc(aes) exists once something asks for it.
	crypt(t, softAESDriver, "aes-128-cbc", pattern(16, 1), pattern(16, 2), pattern(16, 3), ocf.Encrypt)
	drivers := []string{Driver, catalog.VirtioCryptoAESDriver, softAESDriver}
	restorePriorities(t, drivers...)
	dev, err := cryptodev.Open("/dev/crypto", cryptodev.Auto)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()

	for round := range rounds {
		for i, drv := range drivers {
			prefer(t, drv)
			// openssl's afalg engine and tests/speed ask the kernel for
			// "cbc(aes)": the preferred driver answers both.
			if r, err := kcrypto.Resolve("cbc(aes)", "skcipher"); err != nil || r.Driver != drv {
				t.Fatalf("cbc(aes) resolves to %q (%v), want %s", r.Driver, err, drv)
			}
			if s := devCryptoSession(t, dev, "aes-128-cbc", pattern(16, 4)); s.Driver() != "cryptodev:"+drv {
				t.Fatalf("/dev/crypto answers aes-128-cbc with %q, want %s", s.Driver(), drv)
			}
			af, err := afalg.New(afalg.Options{Driver: drv})
			if err != nil {
				t.Fatal(err)
			}
			// The two sides take turns going first, from round to round
			// and engine to engine.
			refFirst := (round+i)%2 == 0
			afRow := refspeed.Row{Path: refspeed.PathAFALG, Cipher: "aes-128-cbc", Engine: drv, Reference: "openssl speed -evp aes-128-cbc -engine afalg"}
			devRow := refspeed.Row{Path: refspeed.PathDevCrypto, Cipher: "aes-128-cbc", Engine: drv, Reference: "cryptodev-linux tests/speed"}
			var cells []refspeed.SpeedCell
			for _, ref := range []bool{refFirst, !refFirst} {
				if ref {
					afRow.Ref = openssl("-engine", "afalg", "-evp", "aes-128-cbc")
					cells = cryptodevSpeed(t)
				} else {
					afRow.OCF = ocfSpeed(af, "aes-128-cbc", speed.Sizes)
					devRow.OCF = ocfSpeed(dev, "aes-128-cbc", devCryptoSizes)
				}
			}
			devRow.Ref = speedCells(t, cells, "AES-128-CBC")
			res.Add(afRow)
			res.Add(devRow)
			if i == 0 {
				// The null cipher: /dev/crypto's own cost per request,
				// no cipher work in either.
				null := refspeed.Row{Path: refspeed.PathDevCrypto, Cipher: "null", Engine: "ecb-cipher_null", Reference: "cryptodev-linux tests/speed",
					Ref: speedCells(t, cells, "NULL"), OCF: ocfSpeed(dev, "null", devCryptoSizes)}
				res.Add(null)
				// tests/speed encrypts in place (src == dst), ocf speed
				// into a separate buffer: the same requests in place
				// tell the request's shape from ocf's driver.
				for _, c := range []struct{ ocf, ref string }{{"null", "NULL"}, {"aes-128-cbc", "AES-128-CBC"}} {
					engine := drv
					if c.ocf == "null" {
						engine = "ecb-cipher_null"
					}
					res.Add(refspeed.Row{Path: refspeed.PathDevCrypto, Cipher: c.ocf + " (in place)", Engine: engine, Reference: "cryptodev-linux tests/speed",
						Ref: speedCells(t, cells, c.ref), OCF: inPlace(t, dev, c.ocf, devCryptoSizes, dur)})
				}
			}
		}
		// TDES: the kernel's software only (no stand-in has it), and
		// OpenSSL's afalg engine has AES-CBC only: its figure is
		// OpenSSL's own software.
		af, err := afalg.New(afalg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := af.Open(mustCipher(t, "des-ede3-cbc"), pattern(24, 5))
		if err != nil {
			t.Fatal(err)
		}
		des := refspeed.Row{Path: refspeed.PathAFALG, Cipher: "des-ede3-cbc", Engine: s.Driver(), Reference: "openssl speed -evp des-ede3-cbc -engine afalg",
			Note: "OpenSSL's afalg engine has AES-CBC only: openssl's figure is its own software, ocf's the kernel's"}
		s.Close()
		des.Ref = openssl("-engine", "afalg", "-evp", "des-ede3-cbc")
		des.OCF = ocfSpeed(af, "des-ede3-cbc", speed.Sizes)
		res.Add(des)
		// User software, no kernel: openssl's own code against ocf's Go
		// engine, in the same guest.
		for _, c := range []string{"aes-128-cbc", "des-ede3-cbc"} {
			res.Add(refspeed.Row{Path: refspeed.PathUser, Cipher: c, Reference: "openssl speed -evp " + c,
				Ref: openssl("-evp", c), OCF: ocfSpeed(soft.New(), c, speed.Sizes)})
		}
	}

	// Proof that openssl's figures went through the kernel's driver, not
	// OpenSSL's own AES: with the test engine preferred and delaying
	// each request by 50 ms, openssl's 16-byte figure collapses.
	prefer(t, Driver)
	if err := SetParam(ParamDelay, 50000); err != nil {
		t.Fatal(err)
	}
	slow := openssl("-engine", "afalg", "-evp", "aes-128-cbc", "-bytes", "16")[16]
	if err := SetParam(ParamDelay, 0); err != nil {
		t.Fatal(err)
	}
	fast := 0.0
	for _, r := range res.Rows {
		if r.Path == refspeed.PathAFALG && r.Engine == Driver {
			fast = r.Ref[16]
		}
	}
	res.EngineCheck = fmt.Sprintf("openssl -engine afalg, aes-128-cbc at 16 bytes, %s preferred: %.4f MB/s, %.6f MB/s with %s=50000", Driver, fast, slow, ParamDelay)
	t.Log(res.EngineCheck)
	// 50 ms per request allows 20 requests a second: 0.00032 MB/s.
	if slow > 0.001 || fast < 10*slow {
		t.Errorf("openssl's afalg figure did not follow the kernel driver's delay: %s", res.EngineCheck)
	}
	line, err := res.Line()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(line)
}

// guestModules are the kernel modules the stand-ins and /dev/crypto's
// guests load: crypto_user: the guest changes which engine the kernel
// (and so /dev/crypto) picks; hmac and the SHAs: the MACs through
// /dev/crypto; des_generic: TDES's CAVP files through /dev/crypto.
func guestModules() []string {
	return append([]string{"af_alg", "algif_skcipher", "cbc", "aes_generic", "crypto_user", "hmac", "sha1_generic", "sha256_generic", "des_generic"},
		VirtioCryptoModules...)
}

func mustCipher(t *testing.T, name string) *ocf.Cipher {
	t.Helper()
	c, err := ocf.LookupCipher(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runTool runs a program of the guest's trees and returns its stdout
// and stderr apart; a failure ends the test with both.
func runTool(t *testing.T, env []string, name string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// cryptodevSpeed runs tests/speed (NULL, then AES-128-CBC, 5 s per size).
func cryptodevSpeed(t *testing.T) []refspeed.SpeedCell {
	t.Helper()
	stdout, stderr := runTool(t, os.Environ(), refspeed.SpeedGuestPath)
	cells, err := refspeed.ParseCryptodevSpeed(stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// speedCells are tests/speed's figures for one cipher, by size.
func speedCells(t *testing.T, cells []refspeed.SpeedCell, cipher string) map[int]float64 {
	t.Helper()
	m := map[int]float64{}
	for _, c := range cells {
		if c.Cipher == cipher {
			m[c.Size] = c.MBps
		}
	}
	if len(m) == 0 {
		t.Fatalf("tests/speed reported nothing for %s", cipher)
	}
	return m
}

// inPlace is ocf speed's measurement with the destination the source,
// as tests/speed sends its requests: MB/s by size.
func inPlace(t *testing.T, d ocf.Driver, cipher string, sizes []int, dur time.Duration) map[int]float64 {
	t.Helper()
	c := mustCipher(t, cipher)
	s, err := d.Open(c, pattern(c.KeySize, 6))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := map[int]float64{}
	for _, size := range sizes {
		buf := make([]byte, size)
		reqs := []ocf.Request{{Op: ocf.Encrypt, IV: make([]byte, c.IVSize), Src: buf, Dst: buf}}
		var stop atomic.Bool
		timer := time.AfterFunc(dur, func() { stop.Store(true) })
		start, ops := time.Now(), 0
		for ; !stop.Load(); ops++ {
			if err := s.Do(reqs); err != nil {
				t.Fatalf("%s %d bytes in place: %v", cipher, size, err)
			}
		}
		timer.Stop()
		m[size] = float64(ops) * float64(size) / time.Since(start).Seconds() / 1e6
	}
	return m
}
