package boards

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/ocfw/ocfw/site"

	"gopkg.in/yaml.v3"

	"github.com/ocfw/ocfw/plan"
)

// KindSite marks a site config: what a router does (site.Site).
const KindSite = "site"

// ParseSite reads a site config (YAML, kind: site) and checks it against
// its board's ports from the catalog. Every problem comes back at once,
// each at FILE:LINE:COLUMN, as an ErrorList.
func (c *Catalog) ParseSite(file string, data []byte) (*site.Site, *Board, error) {
	d, err := c.ParseSiteDoc(file, data)
	if d == nil {
		return nil, nil, err
	}
	return d.Site, d.Board, err
}

// SiteDoc is a site config as parsed, with where each field stands in its
// file, so that checks made later (its tunnels' key files) still point at
// a line and column.
type SiteDoc struct {
	File  string
	Site  *site.Site
	Board *Board // nil when the site names no known board
	pos   positions
}

// At places a message at a field path ("tunnels[0].keys"), or at its
// nearest parent's position when the field is not in the file.
func (d *SiteDoc) At(path, msg string) *Error { return located(d.File, d.pos, path, msg) }

// ParseSiteDoc is ParseSite keeping the positions. The doc is nil only
// when the file is not a mapping at all.
func (c *Catalog) ParseSiteDoc(file string, data []byte) (*SiteDoc, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrorList{{File: file, Msg: `empty file: a site config needs at least "kind: site", "board" and "hostname"`}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrorList{{File: file, Msg: "empty file (only comments)"}}
		}
		return nil, ErrorList{syntaxError(file, err)}
	}
	// The board reads one site config; a second document would be
	// silently dropped (the YAML reader stops after the first). An empty
	// one (a trailing --- or only comments) drops nothing.
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, ErrorList{syntaxError(file, err)}
		}
		if !emptyDoc(&extra) {
			return nil, ErrorList{{File: file, Line: extra.Line, Col: extra.Column, Msg: "a second YAML document (---): a site config is one document; put each site in a file of its own"}}
		}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, ErrorList{{File: file, Line: doc.Line, Col: doc.Column, Msg: "want a mapping of fields (kind: site, board: ..., hostname: ...)"}}
	}
	s := &site.Site{}
	d := &decoder{file: file, what: "site config", pos: positions{}, bad: map[string]bool{}}
	d.decode(doc.Content[0], reflect.ValueOf(s).Elem(), "")
	var ports []plan.Port
	var board *Board
	if s.Board == "" {
		d.errs = append(d.errs, located(file, d.pos, "board", `missing field "board": name the board the site is for (e.g. board: alix2d13); see ocfw boards`))
	} else if b, err := c.Board(s.Board); err != nil {
		d.errs = append(d.errs, located(file, d.pos, "board", err.Error()))
	} else {
		board, ports = b, b.Ports
	}
	for _, e := range s.Validate(ports) {
		if d.bad[e.Path] {
			continue // already reported as it was decoded
		}
		if board == nil && (strings.HasSuffix(e.Path, ".port") || strings.Contains(e.Path, ".ports")) {
			continue // the board is unknown: its ports cannot be checked
		}
		d.errs = append(d.errs, located(file, d.pos, e.Path, e.Msg))
	}
	return &SiteDoc{File: file, Site: s, Board: board, pos: d.pos}, d.errs.err()
}

// emptyDoc says whether a YAML document holds nothing: no content, or a
// lone null.
func emptyDoc(d *yaml.Node) bool {
	if len(d.Content) == 0 {
		return true
	}
	c := d.Content[0]
	return len(d.Content) == 1 && c.Kind == yaml.ScalarNode && c.Tag == "!!null" && (c.Value == "" || c.Value == "~" || c.Value == "null")
}

// located places a message at a field path's position, or its nearest
// parent's when the field is missing.
func located(file string, pos positions, path, msg string) *Error {
	p, ok := pos[path]
	for !ok && path != "" {
		if i := strings.LastIndexAny(path, ".["); i >= 0 {
			path = path[:i]
		} else {
			path = ""
		}
		p, ok = pos[path]
	}
	return &Error{File: file, Line: p.line, Col: p.col, Msg: msg}
}

// SitePortRoles says, for people, which port does what under a site.
func SitePortRoles(s *site.Site, b *Board) []string {
	role := map[string]string{s.WAN.Port: "WAN"}
	for _, p := range s.LAN.Ports {
		role[p] = "LAN"
	}
	var out []string
	for _, p := range b.Ports {
		r := role[p.Name]
		if r == "" {
			r = "unused"
		}
		out = append(out, fmt.Sprintf("%s (%s): %s", p.Name, p.Interface, r))
	}
	return out
}

// FileKind reads the kind of a profile or site file ("board", "card",
// "site"), or "" when the file does not say (or cannot be read: the full
// parse reports why).
func FileKind(data []byte) string {
	var head struct {
		Kind string `yaml:"kind"`
	}
	if yaml.Unmarshal(data, &head) != nil {
		return ""
	}
	return head.Kind
}

// Add puts profiles into the catalog (over built-in ones of the same
// name), e.g. user boards given alongside a site config.
func (c *Catalog) Add(profiles []Profile) { c.add(profiles) }
