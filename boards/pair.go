package boards

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/regfile"
	"github.com/ocfw/ocfw/site"
)

// ReadSites parses site configs, each read with read; a problem in any
// of them is returned, all together, as an ErrorList.
func (c *Catalog) ReadSites(files []string, read func(string) ([]byte, error)) ([]*SiteDoc, error) {
	var docs []*SiteDoc
	var all ErrorList
	for _, f := range files {
		data, err := read(f)
		if err != nil {
			return nil, err
		}
		d, err := c.ParseSiteDoc(f, data)
		var l ErrorList
		if errors.As(err, &l) {
			all = append(all, l...)
			continue
		} else if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	if len(all) > 0 {
		return docs, all
	}
	return docs, nil
}

// CheckedSite is a site config found right, with its tunnels and where
// their key files are.
type CheckedSite struct {
	File, Hostname, Board string
	Tunnels               []CheckedTunnel
}

// CheckedTunnel is one tunnel of a CheckedSite.
type CheckedTunnel struct {
	Name, Peer string
	// Keying is site.KeyingIKEv2 or site.KeyingManual; Keys is the key
	// file (manual) or the PSK file (IKEv2).
	Keying, Keys string
}

// CheckSites checks site configs, each read with read, and their tunnels'
// key files (beside each site config) on their own and, for the two ends
// of a tunnel given together, against each other. It returns the sites
// found right, and every problem as an ErrorList.
func (c *Catalog) CheckSites(files []string, read func(string) ([]byte, error)) ([]CheckedSite, error) {
	var all ErrorList
	docs, err := c.ReadSites(files, read)
	if !errors.As(err, &all) && err != nil {
		return nil, err
	}
	// Key files are checked only for sites that are right themselves:
	// a wrong address would make every key check wrong too.
	all = append(all, CheckTunnels(docs, ReadTunnelKeysFile)...)
	wrong := map[string]bool{}
	for _, e := range all {
		wrong[e.File] = true
	}
	var ok []CheckedSite
	for _, d := range docs {
		right := !wrong[d.File]
		cs := CheckedSite{File: d.File, Hostname: d.Site.Hostname, Board: d.Site.Board}
		for _, t := range d.Site.Tunnels {
			k := TunnelSecretPath(d.File, t)
			right = right && !wrong[k]
			cs.Tunnels = append(cs.Tunnels, CheckedTunnel{Name: t.Name, Peer: t.Peer, Keying: t.Mode(), Keys: k})
		}
		if right {
			ok = append(ok, cs)
		}
	}
	if len(all) > 0 {
		return ok, all
	}
	return ok, nil
}

// ReadTunnelKeysFile reads a key file the way the other inputs are read:
// regular files only, bounded.
func ReadTunnelKeysFile(path string) ([]byte, error) {
	return regfile.ReadFile(path, site.MaxTunnelKeysSize)
}

// TunnelPair is the two ends of one tunnel, each in its site config.
type TunnelPair struct {
	Name   string
	A, B   *SiteDoc
	AI, BI int // the tunnel's index in each site
}

// SameSiteError is two site configs given as a tunnel's two ends that
// are one site (same hostname and WAN address).
type SameSiteError struct{ A, B string }

func (e *SameSiteError) Error() string {
	return fmt.Sprintf("%s and %s are the same site: give the two ends", e.A, e.B)
}

// TunnelChoiceError is two sites that share several tunnels when none
// was named.
type TunnelChoiceError struct {
	A, B   string
	Shared []string
}

func (e *TunnelChoiceError) Error() string {
	return fmt.Sprintf("%s and %s share tunnels %s: say which", e.A, e.B, strings.Join(e.Shared, ", "))
}

// PairMismatchError is every way two site configs are not the two ends
// of the tunnel (CheckTunnelPair).
type PairMismatchError struct{ Errs ErrorList }

func (e *PairMismatchError) Error() string { return e.Errs.Error() }

// PairTunnel reads the site configs a and b and finds tunnel name in both
// (name "": the one tunnel they share), checking they are its two ends.
// Problems in the configs come as an ErrorList, a mismatch between them
// as a *PairMismatchError.
func (c *Catalog) PairTunnel(a, b, name string, read func(string) ([]byte, error)) (*TunnelPair, error) {
	docs, err := c.ReadSites([]string{a, b}, read)
	if err != nil {
		return nil, err
	}
	da, db := docs[0], docs[1]
	if da.Site.Hostname == db.Site.Hostname && da.Site.WAN.Address == db.Site.WAN.Address {
		return nil, &SameSiteError{A: da.File, B: db.File}
	}
	if name == "" {
		if name, err = sharedTunnel(da, db); err != nil {
			return nil, err
		}
	}
	p := &TunnelPair{Name: name, A: da, B: db, AI: da.Tunnel(name), BI: db.Tunnel(name)}
	for _, e := range []struct {
		d *SiteDoc
		i int
	}{{da, p.AI}, {db, p.BI}} {
		if e.i < 0 {
			return nil, fmt.Errorf("%s has no tunnel %q%s", e.d.File, name, tunnelNames(e.d))
		}
	}
	if errs := CheckTunnelPair(da, p.AI, db, p.BI); len(errs) > 0 {
		return nil, &PairMismatchError{Errs: errs}
	}
	return p, nil
}

// NewKeys makes fresh random keys for the pair's tunnel, oriented from
// site A.
func (p *TunnelPair) NewKeys(rand io.Reader, now time.Time) (*site.TunnelKeys, error) {
	t := p.A.Site.Tunnels[p.AI]
	addr, err := p.A.Site.TunnelAddrs(t)
	if err != nil {
		return nil, err
	}
	return site.NewTunnelKeys(rand, p.Name, t.Cipher, t.Auth, addr.Local, addr.Peer, now)
}

// KeyPaths is where the sites' keys fields put the key file, beside each
// site config: one path when both name the same file.
func (p *TunnelPair) KeyPaths() []string {
	paths := []string{TunnelKeysPath(p.A.File, p.A.Site.Tunnels[p.AI])}
	if pb := TunnelKeysPath(p.B.File, p.B.Site.Tunnels[p.BI]); pb != paths[0] {
		paths = append(paths, pb)
	}
	return paths
}

// KeysExistError is a key file that is there already, and may be what
// the boxes run on.
type KeysExistError struct{ Path string }

func (e *KeysExistError) Error() string {
	return e.Path + " exists: the boxes may be using those keys"
}

// WriteTunnelKeys writes k to each path, mode 0600. Unless force, an
// existing file is a *KeysExistError, found before anything is written.
func WriteTunnelKeys(paths []string, k *site.TunnelKeys, force bool) error {
	data, err := k.JSON()
	if err != nil {
		return err
	}
	if !force {
		for _, p := range paths {
			if _, err := os.Lstat(p); err == nil {
				return &KeysExistError{Path: p}
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, p := range paths {
		if err := atomicfile.WriteFile(p, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// sharedTunnel is the one tunnel name both sites have.
func sharedTunnel(a, b *SiteDoc) (string, error) {
	var shared []string
	for _, t := range a.Site.Tunnels {
		if b.Tunnel(t.Name) >= 0 {
			shared = append(shared, t.Name)
		}
	}
	switch len(shared) {
	case 1:
		return shared[0], nil
	case 0:
		return "", fmt.Errorf("%s and %s have no tunnel of the same name%s", a.File, b.File, tunnelNames(a))
	}
	return "", &TunnelChoiceError{A: a.File, B: b.File, Shared: shared}
}

func tunnelNames(d *SiteDoc) string {
	var n []string
	for _, t := range d.Site.Tunnels {
		n = append(n, t.Name)
	}
	if len(n) == 0 {
		return " (it has no tunnels: add one under tunnels:)"
	}
	return fmt.Sprintf(" (%s has %s)", d.File, strings.Join(n, ", "))
}

// Keying is how the pair's tunnel is keyed (both ends alike: PairTunnel
// checked).
func (p *TunnelPair) Keying() string { return p.A.Site.Tunnels[p.AI].Mode() }

// PSKPaths is where the sites' psk fields put the PSK file, beside each
// site config: one path when both name the same file.
func (p *TunnelPair) PSKPaths() []string {
	paths := []string{TunnelPSKPath(p.A.File, p.A.Site.Tunnels[p.AI])}
	if pb := TunnelPSKPath(p.B.File, p.B.Site.Tunnels[p.BI]); pb != paths[0] {
		paths = append(paths, pb)
	}
	return paths
}

// KeyingError is a tunnel keyed otherwise than the command asked for.
type KeyingError struct {
	File, Tunnel, Keying string
}

func (e *KeyingError) Error() string {
	if e.Keying == site.KeyingIKEv2 {
		return fmt.Sprintf("%s: tunnel %s has keying: ikev2 (no keys, cipher or auth): it needs a PSK file, made by ocfw tunnel psk", e.File, e.Tunnel)
	}
	return fmt.Sprintf("%s: tunnel %s has manual keys: its key file is made by ocfw tunnel keys (for IKEv2 write keying: ikev2 and psk instead of keys, cipher and auth)", e.File, e.Tunnel)
}

// IKETunnel reads one site config and finds its IKEv2 tunnel name (name
// "": the site's one IKEv2 tunnel), for a PSK made from one end alone.
// Problems in the config come as an ErrorList.
func (c *Catalog) IKETunnel(file, name string, read func(string) ([]byte, error)) (*SiteDoc, int, error) {
	docs, err := c.ReadSites([]string{file}, read)
	if err != nil {
		return nil, 0, err
	}
	d := docs[0]
	if name == "" {
		var ike []string
		for _, t := range d.Site.Tunnels {
			if t.Mode() == site.KeyingIKEv2 {
				ike = append(ike, t.Name)
			}
		}
		switch {
		case len(ike) == 1:
			name = ike[0]
		case len(d.Site.Tunnels) == 1:
			name = d.Site.Tunnels[0].Name // manual: refused below, saying so
		default:
			return nil, 0, fmt.Errorf("%s has %d IKEv2 tunnels%s: say which", file, len(ike), tunnelNames(d))
		}
	}
	i := d.Tunnel(name)
	if i < 0 {
		return nil, 0, fmt.Errorf("%s has no tunnel %q%s", file, name, tunnelNames(d))
	}
	if m := d.Site.Tunnels[i].Mode(); m != site.KeyingIKEv2 {
		return nil, 0, &KeyingError{File: file, Tunnel: name, Keying: m}
	}
	return d, i, nil
}
