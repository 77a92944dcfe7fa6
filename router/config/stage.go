package config

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/site"
)

// StagingDir is the RAM directory uploads land in (the initramfs's RAM
// file system): nothing there touches the card. Only what `ocf config
// apply` checks moves on, into the store.
const StagingDir = "/run/ocfw/staging"

// SiteName is the site config's name in a bundle and the staging
// directory.
const SiteName = site.CardFile

// MaxFiles bounds a bundle: the site config and its tunnels' key files.
const MaxFiles = 32

// WriteBundle writes a bundle: a tar of the site config (as site.json)
// and key files by name.
func WriteBundle(w io.Writer, siteJSON []byte, files map[string][]byte) error {
	tw := tar.NewWriter(w)
	put := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := put(SiteName, siteJSON); err != nil {
		return err
	}
	for n, b := range files {
		if err := put(n, b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Stage empties dir and unpacks a bundle into it: plain files with plain
// names only, bounded in size and number.
func Stage(dir string, r io.Reader) ([]string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the bundle (a tar of %s and key files): %w", SiteName, err)
		}
		if err := checkName(h.Name); err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%s: not a plain file", h.Name)
		}
		max := int64(site.MaxTunnelKeysSize)
		if h.Name == SiteName {
			max = plan.MaxFileSize
		}
		if h.Size > max {
			return nil, fmt.Errorf("%s: %d bytes, at most %d", h.Name, h.Size, max)
		}
		if len(names) == MaxFiles {
			return nil, fmt.Errorf("more than %d files in the bundle", MaxFiles)
		}
		b, err := io.ReadAll(io.LimitReader(tr, max))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, h.Name), b, 0o600); err != nil {
			return nil, err
		}
		names = append(names, h.Name)
	}
	return names, nil
}

func checkName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\\\x00") || strings.HasPrefix(n, ".") {
		return fmt.Errorf("%q: a file name in the bundle must be a plain name (no directories)", n)
	}
	return nil
}

// ReadStaged reads what dir holds as an apply request's site and files.
func ReadStaged(dir string) ([]byte, map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("nothing staged in %s: upload first (ocf config stage < bundle.tar, or ocfw push)", dir)
	}
	if err != nil {
		return nil, nil, err
	}
	var siteJSON []byte
	files := map[string]string{}
	for _, e := range ents {
		// A name starting with "." is never a staged file (no upload
		// or bundle may have one): sshd's uploads in flight are
		// hidden so, and are not whole yet.
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, err
		}
		if e.Name() == SiteName {
			siteJSON = b
		} else {
			files[e.Name()] = string(b)
		}
	}
	if siteJSON == nil {
		return nil, nil, fmt.Errorf("no %s in %s", SiteName, dir)
	}
	return siteJSON, files, nil
}
