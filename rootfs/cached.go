package rootfs

import (
	"context"
	"fmt"
	"time"

	"github.com/u-root/gobusybox/src/pkg/golang"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/rootfs/usercache"
)

// How mkuimage makes the userland: these and Commands decide the archive
// beside the Go source, so they are in the cache key.
const (
	userlandInit  = "init"
	userlandShell = "gosh"
	userlandTag   = "goshsmall"
)

var userlandUinit = []string{"ocf", "boot"}

// userlandBuildOpts: gobusybox builds with -gcflags=all=-l by default: no
// inlining anywhere, including the Go crypto the board runs in software.
func userlandBuildOpts() *golang.BuildOpts { return &golang.BuildOpts{EnableInlining: true} }

// userlandEnv is the Go environment the userland is built in.
func userlandEnv(target plan.GoTarget, src string) *golang.Environ {
	return golang.Default(
		golang.WithGOOS(target.GOOS),
		golang.WithGOARCH(target.GOARCH),
		golang.DisableCGO(),
		golang.WithBuildTag(userlandTag),
		golang.WithWorkingDir(src),
	)
}

// userlandInputs are the cache key's inputs for the userland of target
// built from src.
func userlandInputs(target plan.GoTarget, src string) (usercache.Inputs, error) {
	env := userlandEnv(target, src)
	if err := env.CompilerInit(); err != nil {
		return usercache.Inputs{}, fmt.Errorf("the Go toolchain: %w", err)
	}
	flags := goBuildArgs(env, "OUT", userlandBuildOpts())
	flags = append(flags, "init="+userlandInit, "shell="+userlandShell, "skip-ldd")
	flags = append(flags, "uinit="+fmt.Sprintf("%q", userlandUinit))
	return usercache.Inputs{
		Go:        env.GoCmd("env").Path,
		SourceDir: src,
		GOOS:      target.GOOS, GOARCH: target.GOARCH, GOARM: target.GOARM, GO386: target.GO386,
		Commands: Commands,
		Tags:     env.BuildTags,
		Flags:    flags,
	}, nil
}

// userland writes mkuimage's archive of the Go userland for target to
// out: from the userland cache when it holds the key of these inputs,
// else built (buildUserland) and stored there. noCache builds without
// looking or storing. A cache that cannot be used is logged and the
// userland built.
func userland(ctx context.Context, target plan.GoTarget, src, tmp, out string, noCache bool, logf func(string, ...any)) (key string, cached bool, err error) {
	t0 := time.Now()
	took := func() time.Duration { return time.Since(t0).Round(100 * time.Millisecond) }
	if noCache {
		if err := buildUserland(ctx, target, src, tmp, out, logf); err != nil {
			return "", false, err
		}
		logf("userland: built in %v (cache not used)", took())
		return "", false, nil
	}
	cache, err := usercache.Default()
	if err == nil {
		cache.Log = logf
		var in usercache.Inputs
		if in, err = userlandInputs(target, src); err == nil {
			key, err = usercache.Key(ctx, in)
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		return "", false, fmt.Errorf("building the Go userland: %w", cerr)
	}
	if err != nil {
		logf("userland cache: %v; building without it", err)
		if err := buildUserland(ctx, target, src, tmp, out, logf); err != nil {
			return "", false, err
		}
		logf("userland: built in %v (not cached)", took())
		return "", false, nil
	}
	hit, err := cache.Get(key, out)
	if err != nil {
		logf("userland cache: %v; building the userland", err)
	}
	if hit {
		logf("userland: reused from cache (key %.12s…)", key)
		return key, true, nil
	}
	if err := buildUserland(ctx, target, src, tmp, out, logf); err != nil {
		return "", false, err
	}
	if err := cache.Put(key, out); err != nil {
		logf("userland: built in %v; not cached: %v", took(), err)
		return key, false, nil
	}
	logf("userland: built in %v, cached (key %.12s…)", took(), key)
	return key, false, nil
}
