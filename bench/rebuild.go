package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/debian"
)

// rebuildSites is the fleet's size: one board, this many site configs.
const rebuildSites = 10

// rebuildResult is what the userland cache (rootfs/usercache) saves: an
// `ocfw build` with only the site config changed, and a fleet of site
// configs for one board, against one build that compiles the userland.
type rebuildResult struct {
	Board string `json:"board"`
	// ColdS is `ocfw build --no-cache --site S`: the userland compiled.
	ColdS    float64   `json:"cold_s"`
	ColdRuns []float64 `json:"cold_runs"`
	// WarmS is `ocfw build --site S'` with the userland in the cache:
	// only the site config differs from the build before.
	WarmS    float64   `json:"warm_s"`
	WarmRuns []float64 `json:"warm_runs"`
	// WarmLog is the best warm build's log (its steps).
	WarmLog []string `json:"warm_log"`
	// FleetS is rebuildSites builds, one per site config, starting with
	// an empty userland cache.
	FleetS    float64   `json:"fleet_s"`
	FleetRuns []float64 `json:"fleet_runs"`
	Sites     int       `json:"sites"`
	// SameImage: the warm build's image (site S, userland from the
	// cache) is byte-identical to the cold build's (site S, compiled).
	SameImage bool `json:"same_image"`
}

// runRebuild times the userland cache's two cases side by side with a
// build that compiles the userland, in a cache directory of its own (the
// kernel packages linked in from the user's), so the user's userland
// cache is neither read nor filled.
func runRebuild(ctx context.Context, r *runner) error {
	bin := r.ocfwCommand(ctx)
	if bin == "" {
		return fmt.Errorf("needs the ocfw command's build")
	}
	real, err := debian.DefaultCacheDir()
	if err != nil {
		return err
	}
	cache := filepath.Join(r.tmp, "rebuild-cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	des, err := os.ReadDir(real)
	if err != nil {
		return fmt.Errorf("the ocfw cache (kernel packages): %w", err)
	}
	for _, de := range des {
		if de.Name() == "userland" {
			continue
		}
		if err := os.Symlink(filepath.Join(real, de.Name()), filepath.Join(cache, de.Name())); err != nil {
			return err
		}
	}
	example, err := os.ReadFile(filepath.Join("examples", "sites", buildBoard+".yaml"))
	if err != nil {
		return err
	}
	dir := filepath.Join(r.tmp, "rebuild")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	site := func(i int) (string, error) {
		p := filepath.Join(dir, fmt.Sprintf("site%02d.yaml", i))
		host := fmt.Sprintf("\nhostname: site%02d\n", i)
		data := bytes.Replace(example, []byte("\nhostname: alix\n"), []byte(host), 1)
		if !bytes.Contains(data, []byte(host)) {
			return "", fmt.Errorf("examples/sites/%s.yaml has no line \"hostname: alix\" to vary", buildBoard)
		}
		return p, os.WriteFile(p, data, 0o644)
	}
	var sites []string
	for i := 0; i < rebuildSites; i++ {
		s, err := site(i)
		if err != nil {
			return err
		}
		sites = append(sites, s)
	}
	env := []string{fmt.Sprintf("SOURCE_DATE_EPOCH=%d", benchEpoch), "OCFW_CACHE=" + cache}
	build := func(out, site string, extra ...string) (float64, string, error) {
		args := append([]string{"build", "--board", buildBoard, "--site", site, "-o", out}, extra...)
		t0 := time.Now()
		log, err := r.run(ctx, env, bin, args...)
		return time.Since(t0).Seconds(), log, err
	}
	sumOf := func(name string) ([32]byte, error) {
		b, err := os.ReadFile(name)
		return sha256.Sum256(b), err
	}
	res := &rebuildResult{Board: buildBoard, Sites: rebuildSites, SameImage: true}
	for t := 0; t < r.trials; t++ {
		r.logf("rebuild %d: cold build (--no-cache)", t)
		coldImg := filepath.Join(dir, fmt.Sprintf("cold%d.img", t))
		s, log, err := build(coldImg, sites[0], "--no-cache")
		if err != nil {
			return err
		}
		if !strings.Contains(log, "userland: built") {
			return fmt.Errorf("the --no-cache build does not say it built the userland:\n%s", tail(log, 600))
		}
		res.ColdRuns = append(res.ColdRuns, s)

		r.logf("rebuild %d: a fleet of %d site configs from an empty userland cache", t, rebuildSites)
		if err := os.RemoveAll(filepath.Join(cache, "userland")); err != nil {
			return err
		}
		fleet := 0.0
		for i, st := range sites {
			s, log, err := build(filepath.Join(dir, fmt.Sprintf("fleet%d-%02d.img", t, i)), st)
			if err != nil {
				return err
			}
			if want := map[bool]string{true: "userland: built", false: "userland: reused from cache"}[i == 0]; !strings.Contains(log, want) {
				return fmt.Errorf("fleet build %d does not say %q:\n%s", i, want, tail(log, 600))
			}
			fleet += s
		}
		res.FleetRuns = append(res.FleetRuns, fleet)

		// The last build had site 9: site 0 again is a change of the
		// site config alone, and gives the cold build's image.
		r.logf("rebuild %d: warm build, only the site config changed", t)
		warmImg := filepath.Join(dir, fmt.Sprintf("warm%d.img", t))
		s, log, err = build(warmImg, sites[0])
		if err != nil {
			return err
		}
		if !strings.Contains(log, "userland: reused from cache") {
			return fmt.Errorf("the warm build does not say it reused the userland:\n%s", tail(log, 600))
		}
		if res.WarmRuns = append(res.WarmRuns, s); s == minOf(res.WarmRuns) {
			res.WarmLog = strings.Split(strings.TrimSpace(log), "\n")
		}
		a, err := sumOf(coldImg)
		if err != nil {
			return err
		}
		b, err := sumOf(warmImg)
		if err != nil {
			return err
		}
		if a != b {
			res.SameImage = false
			r.logf("rebuild %d: the image with the cached userland differs from the cold build's", t)
		}
	}
	res.ColdS, res.WarmS, res.FleetS = minOf(res.ColdRuns), minOf(res.WarmRuns), minOf(res.FleetRuns)
	r.res.Rebuild = res
	r.res.goalMax("19.5", buildBoard+" rebuild, site config changed, userland from the cache", "<= 5 s", "s", res.WarmS, 5)
	r.res.goalMax("19.5", fmt.Sprintf("fleet of %d site configs for %s vs one cold build", rebuildSites, buildBoard), "<= 1.3x", "x", res.FleetS/res.ColdS, 1.3)
	if !res.SameImage {
		return fmt.Errorf("the image built with the cached userland differs from the cold build's")
	}
	return nil
}

func rebuildTable(b *strings.Builder, x *rebuildResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("### 4b. Rebuilds with the userland cache (%s)\n\n", x.Board)
	p("`ocfw build --board %s --site S -o FILE`, the kernel package cached, a userland cache of its own. Cold: `--no-cache`, the userland compiled. Warm: the userland in the cache, only the site config changed since the build before. Fleet: %d site configs one after the other, starting with an empty userland cache. Best of the runs.\n\n", x.Board, x.Sites)
	p("| | time | vs cold |\n|---|---|---|\n")
	p("| cold build (compiles the userland) | %.1f s | 1.00x |\n", x.ColdS)
	p("| warm rebuild, site config changed | %.1f s | %.2fx |\n", x.WarmS, x.WarmS/x.ColdS)
	p("| fleet of %d site configs | %.1f s | %.2fx |\n", x.Sites, x.FleetS, x.FleetS/x.ColdS)
	p("| fleet of %d without the cache (%d cold builds, estimated) | %.1f s | %.2fx |\n\n", x.Sites, x.Sites, float64(x.Sites)*x.ColdS, float64(x.Sites))
	same := "byte-identical to"
	if !x.SameImage {
		same = "**different from**"
	}
	p("The warm build's image (userland from the cache) is %s the cold build's for the same site config.", same)
	if len(x.WarmLog) > 0 {
		p(" Warm build's log: `%s`.", strings.Join(x.WarmLog, "` `"))
	}
	p("\n\n")
}
