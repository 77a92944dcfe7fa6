// Package usercache keeps built Go userlands (mkuimage's archive with the
// busybox binary) between builds, content-addressed by everything that
// decides their bytes: the Go toolchain and target, the commands, tags and
// build flags, go.mod and go.sum, and the source of every package of the
// ocfw module compiled in. A build that changes only the site config, the
// cards or the kernel finds the userland here instead of compiling it again
// (gobusybox builds with `go build -a`, so Go's own cache does not help).
//
// The store is a directory under the ocfw cache (DefaultDir), bounded in
// size with the least recently used entries evicted, shared safely by
// builds running at once (a file lock around lookups and inserts, entries
// renamed into place; one build of a key at a time, the others waiting
// for its entry: Building), and each entry carries its sha256: a corrupt
// or truncated one is removed and the userland rebuilt.
package usercache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// FormatVersion is part of every key: raise it when what an entry holds,
// or how the userland is built from the same inputs, changes in a way the
// other inputs do not show.
const FormatVersion = 1

// Inputs are what a userland is built from.
type Inputs struct {
	// Go is the go command that builds the userland; "" means "go" on
	// $PATH.
	Go string
	// SourceDir is the root of the ocfw module (go.mod).
	SourceDir string
	// The Go target.
	GOOS, GOARCH, GOARM, GO386 string
	// Commands are the command packages, in build order.
	Commands []string
	// Tags are the build tags.
	Tags []string
	// Flags are the go build flags and anything else that decides the
	// artifact's bytes (the builder's options: init, uinit, shell).
	Flags []string
}

// env is the environment the userland's packages are listed (and built)
// in.
func (in Inputs) env() []string {
	return append(os.Environ(), "GOOS="+in.GOOS, "GOARCH="+in.GOARCH, "GOARM="+in.GOARM, "GO386="+in.GO386,
		"CGO_ENABLED=0", "GOFLAGS=")
}

func (in Inputs) goCmd() string {
	if in.Go == "" {
		return "go"
	}
	return in.Go
}

// listed is the part of `go list -json` the key reads.
type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *struct {
		Path    string
		Version string
		Main    bool
		Replace *struct {
			Path    string
			Version string
		}
	}
	GoFiles, CgoFiles, SFiles, HFiles, CFiles, CXXFiles []string
	EmbedFiles, SysoFiles                               []string
	Error                                               *struct{ Err string }
}

// Key is the cache key of the userland built from in: a hex sha256 over
// the cache's format version, the Go version and experiments, the target,
// commands, tags and flags, go.mod and go.sum, the module path and version
// of every dependency from outside the module (go.sum pins their
// content), and the name and content of every file compiled into the
// packages of the module itself (and of modules replaced by a local
// directory). The site config, cards, kernel and anything else the
// initramfs gets beside the userland are not in it.
func Key(ctx context.Context, in Inputs) (string, error) {
	if in.SourceDir == "" || in.GOOS == "" || in.GOARCH == "" || len(in.Commands) == 0 {
		return "", errors.New("usercache: Key needs the source directory, GOOS, GOARCH and the commands")
	}
	h := sha256.New()
	field := func(name string, vals ...string) {
		fmt.Fprintf(h, "%s %d\n", name, len(vals))
		for _, v := range vals {
			fmt.Fprintf(h, "%q\n", v)
		}
	}
	field("format", fmt.Sprint(FormatVersion))
	goenv, err := in.run(ctx, "env", "GOVERSION", "GOEXPERIMENT")
	if err != nil {
		return "", err
	}
	field("goenv", strings.Fields(string(goenv))...)
	field("target", in.GOOS, in.GOARCH, in.GOARM, in.GO386)
	field("commands", in.Commands...)
	field("tags", in.Tags...)
	field("flags", in.Flags...)
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(in.SourceDir, f))
		if err != nil && !(f == "go.sum" && errors.Is(err, os.ErrNotExist)) {
			return "", fmt.Errorf("usercache: %w", err)
		}
		field(f, sum(data))
	}
	args := []string{"list", "-deps", "-json=ImportPath,Dir,Standard,Module,GoFiles,CgoFiles,SFiles,HFiles,CFiles,CXXFiles,EmbedFiles,SysoFiles,Error"}
	if len(in.Tags) > 0 {
		args = append(args, "-tags="+strings.Join(in.Tags, ","))
	}
	out, err := in.run(ctx, append(args, in.Commands...)...)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", fmt.Errorf("usercache: reading go list's output: %w", err)
		}
		if p.Error != nil {
			return "", fmt.Errorf("usercache: package %s: %s", p.ImportPath, p.Error.Err)
		}
		switch {
		case p.Standard:
			// The Go version covers the standard library.
			field("std", p.ImportPath)
		case p.Module != nil && !p.Module.Main && (p.Module.Replace == nil || p.Module.Replace.Version != ""):
			m := p.Module.Path + "@" + p.Module.Version
			if r := p.Module.Replace; r != nil {
				m += "=>" + r.Path + "@" + r.Version
			}
			field("dep", p.ImportPath, m)
		default:
			// The module's own source (or a local replacement): every
			// file the compiler or linker reads.
			var files []string
			for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.SFiles, p.HFiles, p.CFiles, p.CXXFiles, p.EmbedFiles, p.SysoFiles} {
				files = append(files, list...)
			}
			vals := []string{p.ImportPath}
			for _, f := range files {
				data, err := os.ReadFile(filepath.Join(p.Dir, f))
				if err != nil {
					return "", fmt.Errorf("usercache: %w", err)
				}
				vals = append(vals, f, sum(data))
			}
			field("src", vals...)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// run runs the go command in the source directory with the target's
// environment.
func (in Inputs) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, in.goCmd(), args...)
	cmd.Dir = in.SourceDir
	cmd.Env = in.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("usercache: go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
