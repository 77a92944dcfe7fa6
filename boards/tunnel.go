package boards

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/site"
)

// TunnelKeysPath is where the host finds a tunnel's key file: its name
// taken beside the site config (on the box: in the card's ocfw folder).
func TunnelKeysPath(siteFile string, t site.Tunnel) string {
	return filepath.Join(filepath.Dir(siteFile), t.Keys)
}

// TunnelPSKPath is where the host finds an IKEv2 tunnel's PSK file,
// beside the site config like the key files.
func TunnelPSKPath(siteFile string, t site.Tunnel) string {
	return filepath.Join(filepath.Dir(siteFile), t.PSK)
}

// TunnelSecretPath is the file a tunnel's keying needs: its PSK file for
// IKEv2, its key file for manual keys.
func TunnelSecretPath(siteFile string, t site.Tunnel) string {
	if t.Mode() == site.KeyingIKEv2 {
		return TunnelPSKPath(siteFile, t)
	}
	return TunnelKeysPath(siteFile, t)
}

// Tunnel finds a tunnel by name: its index, or -1.
func (d *SiteDoc) Tunnel(name string) int {
	for i, t := range d.Site.Tunnels {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// CheckTunnels checks the tunnels of sites given together: each one's key
// file (read beside its site config with read) on its own and against the
// tunnel, and, for a tunnel whose other end is among the sites, that the
// two configs mirror each other and that both ends' key files give the
// same keys from opposite sides. Every problem is returned, each naming
// the files involved. Sites with errors of their own are skipped.
func CheckTunnels(docs []*SiteDoc, read func(name string) ([]byte, error)) ErrorList {
	var errs ErrorList
	setups := map[*SiteDoc][]*site.TunnelSetup{}
	// Both ends usually name one file: read and report it once.
	type keyFile struct {
		keys *site.TunnelKeys
		err  error
	}
	files := map[string]*keyFile{}
	load := func(path string) *keyFile {
		if f := files[path]; f != nil {
			return f
		}
		f := &keyFile{}
		files[path] = f
		data, err := read(path)
		if err != nil {
			f.err = err
			return f
		}
		var kerrs []error
		f.keys, kerrs = site.ReadTunnelKeys(path, data)
		for _, e := range kerrs {
			errs = append(errs, fileError(path, e))
		}
		return f
	}
	psks := map[string]*site.TunnelPSK{}
	loadPSK := func(path string) (*site.TunnelPSK, error) {
		if p, ok := psks[path]; ok {
			return p, nil
		}
		data, err := read(path)
		if err != nil {
			return nil, err
		}
		p, perrs := site.ReadTunnelPSK(path, data)
		for _, e := range perrs {
			errs = append(errs, fileError(path, e))
		}
		psks[path] = p
		return p, nil
	}
	pskOf := map[*SiteDoc][]*site.TunnelPSK{}
	peerFile := func(d *SiteDoc, name string) string {
		for _, o := range docs {
			if o != d && o.Tunnel(name) >= 0 {
				return o.File
			}
		}
		return "PEER-SITE.yaml"
	}
	for _, d := range docs {
		setups[d] = make([]*site.TunnelSetup, len(d.Site.Tunnels))
		pskOf[d] = make([]*site.TunnelPSK, len(d.Site.Tunnels))
		for i, t := range d.Site.Tunnels {
			if t.Mode() == site.KeyingIKEv2 {
				path := TunnelPSKPath(d.File, t)
				at := fmt.Sprintf("tunnels[%d].psk", i)
				p, err := loadPSK(path)
				switch {
				case errors.Is(err, fs.ErrNotExist):
					e := d.At(at, fmt.Sprintf("PSK file %s not found: make it with ocfw tunnel psk", path))
					e.MissingKeys = &MissingKeys{Site: d.File, Peer: peerFile(d, t.Name), Tunnel: t.Name}
					errs = append(errs, e)
				case err != nil:
					errs = append(errs, d.At(at, err.Error()))
				case p != nil && p.Tunnel != t.Name:
					errs = append(errs, d.At(at, fmt.Sprintf("PSK file %s is for tunnel %q, this is %s: each tunnel has its own (make it with ocfw tunnel psk)", path, p.Tunnel, t.Name)))
				default:
					pskOf[d][i] = p
				}
				continue
			}
			path := TunnelKeysPath(d.File, t)
			at := fmt.Sprintf("tunnels[%d].keys", i)
			f := load(path)
			if err := f.err; errors.Is(err, fs.ErrNotExist) {
				other := "PEER-SITE.yaml"
				for _, o := range docs {
					if o != d && o.Tunnel(t.Name) >= 0 {
						other = o.File
					}
				}
				e := d.At(at, fmt.Sprintf("key file %s not found: make it with ocfw tunnel keys", path))
				e.MissingKeys = &MissingKeys{Site: d.File, Peer: other, Tunnel: t.Name}
				errs = append(errs, e)
				continue
			} else if err != nil {
				errs = append(errs, d.At(at, err.Error()))
				continue
			}
			if f.keys == nil {
				continue
			}
			s, serrs := t.Setup(d.Site, f.keys)
			for _, e := range serrs {
				errs = append(errs, d.At(at, fmt.Sprintf("key file %s: %v", path, e)))
			}
			setups[d][i] = s
		}
	}
	for x, a := range docs {
		for ai, t := range a.Site.Tunnels {
			for _, b := range docs[x+1:] {
				bi := b.Tunnel(t.Name)
				if bi < 0 {
					continue
				}
				pe := CheckTunnelPair(a, ai, b, bi)
				errs = append(errs, pe...)
				if pa, pb := pskOf[a][ai], pskOf[b][bi]; len(pe) == 0 && pa != nil && pb != nil && !site.SamePSK(pa, pb) {
					errs = append(errs, a.At(fmt.Sprintf("tunnels[%d].psk", ai), fmt.Sprintf(
						"tunnel %s: PSK file %s and %s's %s hold different keys: both ends need the same file (make one with ocfw tunnel psk and install it on both)",
						t.Name, TunnelPSKPath(a.File, t), b.File, TunnelPSKPath(b.File, b.Site.Tunnels[bi]))))
				}
				sa, sb := setups[a][ai], setups[b][bi]
				if len(pe) == 0 && sa != nil && sb != nil && (!sameSA(sa.Out, sb.In) || !sameSA(sa.In, sb.Out)) {
					errs = append(errs, a.At(fmt.Sprintf("tunnels[%d].keys", ai), fmt.Sprintf(
						"tunnel %s: key file %s and %s's %s give different keys: both ends need the same file (make new ones with ocfw tunnel keys and install them on both)",
						t.Name, TunnelKeysPath(a.File, t), b.File, TunnelKeysPath(b.File, b.Site.Tunnels[bi]))))
				}
			}
		}
	}
	return errs
}

func sameSA(a, b site.SAKeys) bool {
	return a.SPI == b.SPI && bytes.Equal(a.EncKey, b.EncKey) && bytes.Equal(a.AuthKey, b.AuthKey)
}

// CheckTunnelPair checks that tunnel ai of site a and tunnel bi of site b
// are the two ends of one tunnel: each one's local address is the other's
// peer, each one's local subnet the other's remote subnet, and they use
// the same algorithms. Problems are placed in a's file, naming b's.
func CheckTunnelPair(a *SiteDoc, ai int, b *SiteDoc, bi int) ErrorList {
	var errs ErrorList
	ta, tb := a.Site.Tunnels[ai], b.Site.Tunnels[bi]
	p := fmt.Sprintf("tunnels[%d]", ai)
	bad := func(field, format string, args ...any) {
		errs = append(errs, a.At(p+field, fmt.Sprintf("tunnel %s: ", ta.Name)+fmt.Sprintf(format, args...)))
	}
	aa, errA := a.Site.TunnelAddrs(ta)
	ba, errB := b.Site.TunnelAddrs(tb)
	if errA != nil || errB != nil {
		return nil // reported by each site's own checks
	}
	if aa.Peer != ba.Local {
		bad(".peer", "peer %s, but %s's end is at %s", aa.Peer, b.File, ba.Local)
	}
	if ba.Peer != aa.Local {
		bad(".local", "this end is at %s, but %s's peer is %s", aa.Local, b.File, ba.Peer)
	}
	if aa.LocalSubnet != ba.RemoteSubnet {
		bad(".local_subnet", "local_subnet %s, but %s's remote_subnet is %s", aa.LocalSubnet, b.File, ba.RemoteSubnet)
	}
	if aa.RemoteSubnet != ba.LocalSubnet {
		bad(".remote_subnet", "remote_subnet %s, but %s's local_subnet is %s", aa.RemoteSubnet, b.File, ba.LocalSubnet)
	}
	if ta.Mode() != tb.Mode() {
		bad(".keying", "keying %s, but %s's is %s: both ends key the tunnel alike", ta.Mode(), b.File, tb.Mode())
		return errs
	}
	if ta.Mode() == site.KeyingIKEv2 {
		checkIKEPair(a, ai, b, bi, bad)
		return errs
	}
	if ta.Cipher != tb.Cipher {
		bad(".cipher", "cipher %s, but %s's is %s", ta.Cipher, b.File, tb.Cipher)
	}
	if ta.Auth != tb.Auth {
		bad(".auth", "auth %s, but %s's is %s", ta.Auth, b.File, tb.Auth)
	}
	return errs
}

// checkIKEPair checks two IKEv2 ends against each other: each one's id
// is what the other expects, they share a proposal for the IKE SA and for
// the CHILD SAs, and both use PFS or neither. Lifetimes and liveness
// intervals may differ: each end rekeys and checks on its own.
func checkIKEPair(a *SiteDoc, ai int, b *SiteDoc, bi int, bad func(string, string, ...any)) {
	ta, tb := a.Site.Tunnels[ai], b.Site.Tunnels[bi]
	ka, errA := a.Site.IKE(ta)
	kb, errB := b.Site.IKE(tb)
	if errA != nil || errB != nil {
		return // reported by each site's own checks
	}
	if ka.LocalID != kb.RemoteID {
		bad(".local_id", "this end's id is %s, but %s's remote_id is %s", ka.LocalID, b.File, kb.RemoteID)
	}
	if ka.RemoteID != kb.LocalID {
		bad(".remote_id", "remote_id %s, but %s's id is %s", ka.RemoteID, b.File, kb.LocalID)
	}
	if !shareProposal(ka.IKEProposals, kb.IKEProposals, false) {
		bad(".ike_proposals", "%s and %s's %s share no proposal: the IKE SA would never come up", strings.Join(ta.IKEProposalList(), ", "), b.File, strings.Join(tb.IKEProposalList(), ", "))
	}
	if !shareProposal(ka.ESPProposals, kb.ESPProposals, true) {
		bad(".esp_proposals", "%s and %s's %s share no proposal: no CHILD SA would come up", strings.Join(ta.ESPProposalList(), ", "), b.File, strings.Join(tb.ESPProposalList(), ", "))
	}
	if ka.PFS != kb.PFS {
		bad(".pfs", "pfs %v, but %s's is %v: the first rekey would fail", ka.PFS, b.File, kb.PFS)
	}
}

// shareProposal says whether some proposal of a and some of b have a
// transform of each type in common, as a responder's choice needs.
func shareProposal(a, b []site.Proposal, esp bool) bool {
	common := func(x, y []site.Transform) bool {
		for _, t := range x {
			for _, u := range y {
				if t.ID == u.ID && t.KeyBits == u.KeyBits {
					return true
				}
			}
		}
		return false
	}
	for _, p := range a {
		for _, q := range b {
			if common(p.Encr, q.Encr) && common(p.Integ, q.Integ) && (esp || common(p.PRF, q.PRF) && common(p.DH, q.DH)) {
				return true
			}
		}
	}
	return false
}

// fileError turns one of plan's "FILE[:LINE:COL]: message" errors into a
// located Error, so the list sorts and prints like the others.
func fileError(file string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), file)
	e := &Error{File: file}
	if rest, ok := strings.CutPrefix(msg, ":"); ok {
		msg = rest
		if l, c, m, ok := lineColPrefix(msg); ok {
			e.Line, e.Col, msg = l, c, m
		}
	}
	e.Msg = strings.TrimPrefix(msg, " ")
	return e
}

// lineColPrefix splits "3:13: message".
func lineColPrefix(s string) (line, col int, msg string, ok bool) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return 0, 0, s, false
	}
	l, err1 := strconv.Atoi(parts[0])
	c, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, s, false
	}
	return l, c, parts[2], true
}
