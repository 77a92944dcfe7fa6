package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/internal/lab/refspeed"
)

// devCryptoRounds caps the rounds of the devcrypto section: a round is
// about 6 minutes of fixed-length measurements in the guest.
const devCryptoRounds = 2

// goalSizes are the sizes whose ratios the goals read: 16 to 8192 bytes
// where the tool reports them (tests/speed starts at 512).
const goalMin, goalMax = 16, 8192

// runDevCrypto is item 11, the seeds' own method through the kernel
// (internal/lab/testengine's TestBenchDevCrypto, one QEMU boot).
func runDevCrypto(ctx context.Context, r *runner) error {
	rounds := min(r.trials, devCryptoRounds)
	out, err := r.run(ctx, []string{refspeed.EnvBench + "=" + strconv.Itoa(rounds)},
		"go", "test", "-count=1", "-timeout", "60m", "-run", "^TestBenchDevCrypto$", "-v", "./internal/lab/testengine")
	if err != nil {
		// The guest's own messages are what says why.
		r.logf("devcrypto: the test's output ends:\n%s", tail(out, 4000))
		return err
	}
	if strings.Contains(out, "--- SKIP: TestBenchDevCrypto") {
		return fmt.Errorf("the QEMU benchmark skipped (kernel package, QEMU, apt-get or gcc-12-multilib missing): %s", tail(out, 400))
	}
	res, err := refspeed.ParseResult(out)
	if err != nil {
		return err
	}
	r.res.DevCrypto = res
	for _, row := range res.Rows {
		if row.Path == refspeed.PathUser || row.Note != "" {
			continue // not the same work on both sides: no goal
		}
		w, size := worstRatio(row)
		r.res.goal("11", fmt.Sprintf("ocf speed vs %s, %s on %s, worst size %d-%d (%d)", row.Reference, row.Cipher, row.Engine, goalMin, goalMax, size),
			">= 0.9x", w, 0.9)
	}
	return nil
}

// ratios are ocf's figure over the reference's, by size, for the sizes
// both report.
func ratios(row refspeed.Row) map[int]float64 {
	m := map[int]float64{}
	for s, ref := range row.Ref {
		if o, ok := row.OCF[s]; ok && ref > 0 {
			m[s] = o / ref
		}
	}
	return m
}

// worstRatio is the lowest ratio between goalMin and goalMax bytes and
// its size.
func worstRatio(row refspeed.Row) (float64, int) {
	worst, at := 0.0, 0
	for s, v := range ratios(row) {
		if s < goalMin || s > goalMax {
			continue
		}
		if at == 0 || v < worst {
			worst, at = v, s
		}
	}
	return worst, at
}

func devCryptoTable(b *strings.Builder, res *refspeed.Result) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("### 11. The seeds' tools through the kernel: `openssl speed -engine afalg` and cryptodev-linux's `tests/speed` vs `ocf speed`, one QEMU boot\n\n")
	p("Debian linux-image-686 %s under `qemu-system-i386 -cpu pentium2` (TCG), virtio-crypto and `ocfw_testaes` loaded, cryptodev.ko (cryptodev-linux 1.14) in front; Debian's i386 %s run from its own tree (its `ld-linux.so.2` and libraries); `tests/speed` built `gcc-12 -m32 -static`. openssl speed and ocf speed: %g s per cell; tests/speed: its own 5 s. Best of %d round(s), the sides taking turns to go first. Each engine is made the kernel's choice for cbc(aes) in turn (crypto_user), so both tools reach the same driver. Cells: ocf/reference (ocf MB/s / reference MB/s).\n\n",
		res.Kernel, res.OpenSSL, res.Seconds, res.Rounds)
	for _, path := range []struct{ name, title string }{
		{refspeed.PathAFALG, "AF_ALG: `openssl speed -elapsed -evp CIPHER -engine afalg` vs ocf speed through ocf's AF_ALG driver"},
		{refspeed.PathDevCrypto, "/dev/crypto: cryptodev-linux's `tests/speed` vs ocf speed through ocf's /dev/crypto driver"},
		{refspeed.PathUser, "user software, no kernel: `openssl speed -elapsed -evp CIPHER` vs ocf speed on ocf's Go engine, in the same guest"},
	} {
		var rows []refspeed.Row
		sizeSet := map[int]bool{}
		for _, row := range res.Rows {
			if row.Path == path.name {
				rows = append(rows, row)
				for s := range ratios(row) {
					sizeSet[s] = true
				}
			}
		}
		if len(rows) == 0 {
			continue
		}
		var sizes []int
		for s := range sizeSet {
			sizes = append(sizes, s)
		}
		sort.Ints(sizes)
		p("%s:\n\n| cipher | kernel driver |", path.title)
		for _, s := range sizes {
			p(" %d |", s)
		}
		p("\n|---|---|")
		for range sizes {
			p("---|")
		}
		p("\n")
		var notes []string
		for _, row := range rows {
			engine := row.Engine
			if engine == "" {
				engine = "—"
			}
			p("| %s | %s |", row.Cipher, engine)
			rs := ratios(row)
			for _, s := range sizes {
				if v, ok := rs[s]; ok {
					p(" %.2f (%.3g/%.3g) |", v, row.OCF[s], row.Ref[s])
				} else {
					p(" — |")
				}
			}
			p("\n")
			if row.Note != "" {
				notes = append(notes, fmt.Sprintf("%s on %s: %s.", row.Cipher, engine, row.Note))
			}
		}
		p("\n")
		for _, n := range notes {
			p("%s\n\n", n)
		}
	}
	if res.EngineCheck != "" {
		p("The engine on openssl's path: %s.\n\n", res.EngineCheck)
	}
}
