package rootfs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/u-root/gobusybox/src/pkg/bb"
	"github.com/u-root/gobusybox/src/pkg/golang"
	"github.com/u-root/mkuimage/cpio"
	"github.com/u-root/mkuimage/uimage/builder"
	"github.com/u-root/mkuimage/uimage/initramfs"
	"github.com/u-root/uio/llog"
)

// busyboxBuilder is mkuimage's busybox builder (builder.GBBBuilder) with
// a `go build` that can be stopped. mkuimage takes no context and runs
// `go build` with exec.Command: an interrupted ocfw build left it (and
// the compilers it starts) running for a minute, and its work directory
// in $TMPDIR. Here gobusybox only generates the busybox source; the
// compile runs in its own process group, killed whole when ctx ends, with
// its work directory (GOTMPDIR) inside the build's temporary directory.
type busyboxBuilder struct {
	ctx context.Context
	// gotmp is go build's GOTMPDIR.
	gotmp string
	// env are variables go build gets after gobusybox's (goEnv), so they
	// win over the process environment's.
	env []string
}

// DefaultBinaryDir implements builder.Builder: /bbin, as GBBBuilder.
func (*busyboxBuilder) DefaultBinaryDir() string { return "bbin" }

// Build implements builder.Builder: the same binary, /bbin/bb, and a
// symlink per command, as GBBBuilder makes.
func (b *busyboxBuilder) Build(l *llog.Logger, af *initramfs.Files, opts builder.Opts) error {
	if opts.TempDir == "" {
		return builder.ErrTempDirMissing
	}
	if opts.Env == nil {
		return builder.ErrEnvMissing
	}
	if err := b.ctx.Err(); err != nil {
		return err
	}
	bbPath := filepath.Join(opts.TempDir, "bb")
	if err := bb.BuildBusybox(l.AtLevel(slog.LevelInfo), &bb.Opts{
		Env:          opts.Env,
		GenSrcDir:    opts.TempDir,
		CommandPaths: opts.Packages,
		BinaryPath:   bbPath,
		GenerateOnly: true,
	}); err != nil {
		return fmt.Errorf("%w: %w", builder.ErrBusyboxFailed, err)
	}
	if err := b.ctx.Err(); err != nil {
		return err
	}
	// What bb.BuildBusybox would run next: the generated tree is a GOPATH.
	env := opts.Env.Copy(golang.WithGO111MODULE("off"), golang.WithGOPATH(opts.TempDir), golang.WithMod(""))
	if err := b.compile(env, filepath.Join(opts.TempDir, "src/bb.u-root.com/bb"), bbPath, opts.BuildOpts); err != nil {
		return fmt.Errorf("%w: %w", builder.ErrBusyboxFailed, err)
	}
	if err := af.AddFile(bbPath, "bbin/bb"); err != nil {
		return err
	}
	for _, pkg := range opts.Packages {
		if path.Base(pkg) == "bb" {
			continue
		}
		if err := af.AddRecord(cpio.Symlink(filepath.Join(opts.BinaryDir, path.Base(pkg)), "bb")); err != nil {
			return err
		}
	}
	return nil
}

// goBuildArgs are the arguments gobusybox's Environ.BuildDir gives `go
// build` for the Go compiler but -a: inlining only when asked, stripped,
// no build id, trimmed paths, the build tags. Without -a the compiler's
// outputs come from Go's build cache, keyed by the sources, flags and
// environment (-trimpath leaves the temporary GOPATH out of the key): a
// userland the ocfw cache lacks links in seconds instead of compiling
// for half a minute, with the same bytes (TestUserlandCache compiles
// into an empty GOCACHE and compares).
func goBuildArgs(env *golang.Environ, out string, opts *golang.BuildOpts) []string {
	if opts == nil {
		opts = &golang.BuildOpts{}
	}
	args := []string{"build", "-o", out}
	if env.InstallSuffix != "" {
		args = append(args, "-installsuffix", env.InstallSuffix)
	}
	if !opts.EnableInlining {
		args = append(args, "-gcflags=all=-l")
	}
	if !opts.NoStrip {
		args = append(args, "-ldflags", "-s -w -buildid=")
	}
	if !opts.NoTrimPath {
		args = append(args, "-trimpath")
	}
	if len(env.BuildTags) > 0 {
		args = append(args, "-tags="+strings.Join(env.BuildTags, ","))
	}
	args = append(args, opts.ExtraArgs...)
	return append(args, ".")
}

// buildEnv is go build's environment: gobusybox's (the process's, then
// the Environ's), then GOTMPDIR and b.env. os/exec keeps the last value
// of a variable named twice.
func (b *busyboxBuilder) buildEnv(base []string) []string {
	env := append(append([]string(nil), base...), "GOTMPDIR="+b.gotmp)
	return append(env, b.env...)
}

// compile runs `go build` in dir. The go command and its compilers and
// linker share one process group; when ctx ends the whole group is
// killed, and compile returns only once they are gone.
func (b *busyboxBuilder) compile(env *golang.Environ, dir, out string, opts *golang.BuildOpts) error {
	if err := env.CompilerInit(); err != nil {
		return err
	}
	if env.Compiler.Type != golang.CompilerGo {
		return fmt.Errorf("compiler %q: ocfw builds the userland with the Go toolchain only", env.Compiler.Identifier)
	}
	if err := os.MkdirAll(b.gotmp, 0o700); err != nil {
		return err
	}
	proto := env.GoCmd("build") // the go binary and environment gobusybox would use
	cmd := exec.CommandContext(b.ctx, proto.Path, goBuildArgs(env, out, opts)...)
	cmd.Dir = dir
	cmd.Env = b.buildEnv(proto.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// The group is dead once killed; this only bounds the wait for the
	// output pipe should something outside the group hold it.
	cmd.WaitDelay = 10 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	err := cmd.Run()
	if cerr := b.ctx.Err(); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, strings.TrimSpace(output.String()))
	}
	return nil
}
