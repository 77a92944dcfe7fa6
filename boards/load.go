package boards

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ocfw/ocfw/internal/regfile"
)

//go:embed profiles/*.yaml
var embedded embed.FS

// Profile is a parsed profile file: exactly one of Board and Card is set.
type Profile struct {
	Board *Board
	Card  *Card
}

// Name is the profile's name.
func (p Profile) Name() string {
	if p.Board != nil {
		return p.Board.Name
	}
	return p.Card.Name
}

func (p Profile) file() string {
	if p.Board != nil {
		return p.Board.src.file
	}
	return p.Card.src.file
}

func (p Profile) namePos() pos {
	if p.Board != nil {
		return p.Board.src.pos["name"]
	}
	return p.Card.src.pos["name"]
}

// Parse reads one profile from data; file names it in errors. All
// problems found are returned together as an ErrorList.
func Parse(file string, data []byte) (Profile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Profile{}, ErrorList{{File: file, Msg: `empty file: a profile needs at least "kind: board" or "kind: card" and a "name"`}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Profile{}, ErrorList{{File: file, Msg: `empty file (only comments): a profile needs at least "kind: board" or "kind: card" and a "name"`}}
		}
		return Profile{}, ErrorList{syntaxError(file, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return Profile{}, ErrorList{{File: file, Line: extra.Line, Col: extra.Column, Msg: "a second YAML document (---): put one profile per file"}}
	} else if !errors.Is(err, io.EOF) {
		return Profile{}, ErrorList{syntaxError(file, err)}
	}
	if len(doc.Content) == 0 {
		return Profile{}, ErrorList{{File: file, Msg: `empty file: a profile needs at least "kind" and "name"`}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return Profile{}, ErrorList{{File: file, Line: root.Line, Col: root.Column, Msg: fmt.Sprintf("want a mapping of fields (kind: board, name: ...), got %s", nodeKind(root))}}
	}
	var kindNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "kind" {
			kindNode = root.Content[i+1]
		}
	}
	if kindNode == nil {
		return Profile{}, ErrorList{{File: file, Line: root.Line, Col: root.Column, Msg: `missing field "kind": want "board" or "card"`}}
	}
	switch kindNode.Value {
	case KindBoard:
		b := &Board{}
		d := &decoder{file: file, what: "board profile", pos: positions{}, bad: map[string]bool{}}
		d.decode(root, reflect.ValueOf(b).Elem(), "")
		b.src = source{file: file, pos: d.pos}
		b.emptyLists()
		// Every mistake in one run: the checks run even after decoding
		// errors, skipping the fields those already reported.
		d.errs = append(d.errs, b.validate(d.bad)...)
		return Profile{Board: b}, d.errs.err()
	case KindCard:
		c := &Card{}
		d := &decoder{file: file, what: "card profile", pos: positions{}, bad: map[string]bool{}}
		d.decode(root, reflect.ValueOf(c).Elem(), "")
		c.src = source{file: file, pos: d.pos}
		d.errs = append(d.errs, c.validate(d.bad)...)
		return Profile{Card: c}, d.errs.err()
	}
	return Profile{}, ErrorList{{File: file, Line: kindNode.Line, Col: kindNode.Column,
		Msg: fmt.Sprintf("kind %s: want \"board\" or \"card\"%s", quote(kindNode.Value), suggest(kindNode.Value, []string{KindBoard, KindCard}))}}
}

// MaxProfileSize bounds a profile file: the built-in ones are about
// 1 KiB, so anything near this is not a profile, and reading stops here.
const MaxProfileSize = 256 << 10

// ParseFile reads and parses one profile file. It refuses anything but a
// regular file of at most MaxProfileSize bytes, without blocking on a
// FIFO or reading an endless device.
func ParseFile(file string) (Profile, error) {
	data, err := regfile.ReadFile(file, MaxProfileSize)
	if err != nil {
		return Profile{}, ErrorList{readError(file, err)}
	}
	return Parse(file, data)
}

// readError locates a failure to read a profile file.
func readError(file string, err error) *Error {
	var re *regfile.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &re) && errors.Is(err, regfile.ErrTooLarge):
		return &Error{File: file, Msg: re.Msg + " for a profile (a profile is a few KiB)"}
	case errors.As(err, &re):
		return &Error{File: file, Msg: re.Msg + "; give a profile (.yaml) file"}
	case errors.As(err, &pe):
		return &Error{File: file, Msg: pe.Err.Error()}
	}
	return &Error{File: file, Msg: err.Error()}
}

// Catalog is the set of boards and cards a command works with: the
// embedded profiles, possibly overlaid with a user's directory.
type Catalog struct {
	boards  map[string]*Board // by name
	aliases map[string]string // alias -> board name
	cards   map[string]*Card
}

// Embedded returns the catalog of profiles shipped inside ocfw.
func Embedded() (*Catalog, error) {
	c := &Catalog{boards: map[string]*Board{}, aliases: map[string]string{}, cards: map[string]*Card{}}
	profiles, err := parseFS(embedded, "profiles", "boards/profiles/")
	if err != nil {
		return nil, err
	}
	c.add(profiles)
	return c, nil
}

// ProfilesError is a directory of profiles (Overlay) that cannot be
// read as one.
type ProfilesError struct {
	Dir string
	Err error
}

func (e *ProfilesError) Error() string { return "profiles directory " + e.Dir + ": " + e.Err.Error() }
func (e *ProfilesError) Unwrap() error { return e.Err }

// Overlay adds the profiles in dir (*.yaml, *.yml, recursively), replacing
// embedded ones of the same name.
func (c *Catalog) Overlay(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return &ProfilesError{Dir: dir, Err: err}
	}
	if !st.IsDir() {
		return &ProfilesError{Dir: dir, Err: errors.New("not a directory (want a directory of .yaml profiles)")}
	}
	profiles, err := parseFS(os.DirFS(dir), ".", dir+string(filepath.Separator))
	if err != nil {
		return err
	}
	if errs := c.shadowed(profiles); len(errs) > 0 {
		return errs.err()
	}
	c.add(profiles)
	return nil
}

// shadowed finds user boards whose name or alias is already the name or
// alias of a board in the catalog that they do not replace: such a name
// would silently reach the user's board instead of the built-in one.
// Replacing a board by giving its name is what --profiles is for, and
// drops the replaced board's aliases.
func (c *Catalog) shadowed(profiles []Profile) ErrorList {
	replaced := map[string]bool{}
	for _, p := range profiles {
		if p.Board != nil {
			replaced[p.Board.Name] = true
		}
	}
	owner := map[string]*Board{} // names and aliases of the boards that stay
	for name, b := range c.boards {
		if replaced[name] {
			continue
		}
		owner[name] = b
		for _, a := range b.Aliases {
			owner[a] = b
		}
	}
	var errs ErrorList
	for _, p := range profiles {
		b := p.Board
		if b == nil {
			continue
		}
		if o, ok := owner[b.Name]; ok {
			at := b.src.pos["name"]
			errs = append(errs, &Error{File: b.src.file, Line: at.line, Col: at.col,
				Msg: fmt.Sprintf("name %q is an alias of the built-in board %s (%s): it would hide it; choose another name, or replace %s by naming this profile %q",
					b.Name, o.Name, o.File(), o.Name, o.Name)})
		}
		for i, a := range b.Aliases {
			o, ok := owner[a]
			if !ok {
				continue
			}
			what := "the name"
			if o.Name != a {
				what = "an alias"
			}
			at := b.src.pos[fmt.Sprintf("aliases[%d]", i)]
			errs = append(errs, &Error{File: b.src.file, Line: at.line, Col: at.col,
				Msg: fmt.Sprintf("alias %q is %s of the built-in board %s (%s): it would hide it; choose another alias, or replace %s by naming this profile %q",
					a, what, o.Name, o.File(), o.Name, o.Name)})
		}
	}
	return errs
}

func (c *Catalog) add(profiles []Profile) {
	for _, p := range profiles {
		if p.Board != nil {
			if old, ok := c.boards[p.Board.Name]; ok {
				for _, a := range old.Aliases {
					delete(c.aliases, a)
				}
			}
			c.boards[p.Board.Name] = p.Board
			for _, a := range p.Board.Aliases {
				c.aliases[a] = p.Board.Name
			}
		} else {
			c.cards[p.Card.Name] = p.Card
		}
	}
}

// parseFS parses every profile below root in fsys. prefix turns fs paths
// into the names users see in errors. A *.yaml or *.yml name that is not
// a regular file (a directory, a FIFO, a device) is an error rather than
// skipped or read: the name says it is meant to be a profile.
func parseFS(fsys fs.FS, root, prefix string) ([]Profile, error) {
	shown := func(p string) string {
		if root == "." {
			return path.Clean(prefix + p)
		}
		return path.Clean(prefix + strings.TrimPrefix(p, root+"/"))
	}
	var files []string
	var errs ErrorList
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml") {
			return nil
		}
		fi, err := fs.Stat(fsys, p) // follows a symbolic link to a profile
		if err != nil {
			errs = append(errs, readError(shown(p), err))
			return nil
		}
		if !fi.Mode().IsRegular() {
			msg := "not a regular file but " + regfile.Kind(fi.Mode()) + ": a profile must be a file"
			if fi.IsDir() {
				msg = "a directory named like a profile file: rename it if it holds profiles, or remove it " +
					"(a directory whose name ends in .yaml is usually a mistake, such as a bind mount of a file that did not exist)"
			}
			errs = append(errs, &Error{File: shown(p), Msg: msg})
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var profiles []Profile
	for _, f := range files {
		data, err := readFS(fsys, f, shown(f))
		if err != nil {
			errs = append(errs, readError(shown(f), err))
			continue
		}
		p, err := Parse(shown(f), data)
		if err != nil {
			errs = append(errs, asList(err)...)
			continue
		}
		profiles = append(profiles, p)
	}
	errs = append(errs, duplicates(profiles)...)
	return profiles, errs.err()
}

// readFS reads a profile from fsys, at most MaxProfileSize bytes.
func readFS(fsys fs.FS, name, shown string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := regfile.CheckRegular(shown, fi.Mode()); err != nil {
		return nil, err
	}
	return regfile.ReadAll(shown, f, MaxProfileSize)
}

// LoadFiles parses the named files as one set, as `ocfw validate` does:
// every file's problems and any duplicate names among them.
func LoadFiles(files []string) ([]Profile, error) {
	var profiles []Profile
	var errs ErrorList
	for _, f := range files {
		p, err := ParseFile(f)
		if err != nil {
			errs = append(errs, asList(err)...)
			continue
		}
		profiles = append(profiles, p)
	}
	errs = append(errs, duplicates(profiles)...)
	return profiles, errs.err()
}

func asList(err error) ErrorList {
	var l ErrorList
	if errors.As(err, &l) {
		return l
	}
	return ErrorList{{Msg: err.Error()}}
}

// duplicates reports names (and board aliases) defined twice in one set.
func duplicates(profiles []Profile) ErrorList {
	var errs ErrorList
	type def struct {
		file string
		at   pos
	}
	seen := map[string]def{}
	for _, p := range profiles {
		names := []string{p.Name()}
		if p.Board != nil {
			names = append(names, p.Board.Aliases...)
		}
		for i, n := range names {
			at := p.namePos()
			if i > 0 {
				at = p.Board.src.pos[fmt.Sprintf("aliases[%d]", i-1)]
			}
			if prev, ok := seen[n]; ok {
				errs = append(errs, &Error{File: p.file(), Line: at.line, Col: at.col,
					Msg: fmt.Sprintf("duplicate profile name %q: already defined at %s:%d:%d; names and board aliases must be unique", n, prev.file, prev.at.line, prev.at.col)})
				continue
			}
			seen[n] = def{p.file(), at}
		}
	}
	return errs
}

// Boards returns every board, sorted by name.
func (c *Catalog) Boards() []*Board {
	out := make([]*Board, 0, len(c.boards))
	for _, b := range c.boards {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Cards returns every card, sorted by name.
func (c *Catalog) Cards() []*Card {
	out := make([]*Card, 0, len(c.cards))
	for _, k := range c.cards {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BoardNames lists board names and aliases, sorted.
func (c *Catalog) BoardNames() []string {
	var names []string
	for n := range c.boards {
		names = append(names, n)
	}
	for a := range c.aliases {
		names = append(names, a)
	}
	sort.Strings(names)
	return names
}

// CardNames lists card names, sorted.
func (c *Catalog) CardNames() []string {
	var names []string
	for n := range c.cards {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Board finds a board by name or alias.
func (c *Catalog) Board(name string) (*Board, error) {
	if b, ok := c.boards[name]; ok {
		return b, nil
	}
	if n, ok := c.aliases[name]; ok {
		return c.boards[n], nil
	}
	return nil, fmt.Errorf("unknown board %s%s; known boards: %s", quote(name), suggest(name, c.BoardNames()), strings.Join(c.BoardNames(), ", "))
}

// Card finds a card by name.
func (c *Catalog) Card(name string) (*Card, error) {
	if k, ok := c.cards[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown card %s%s; known cards: %s", quote(name), suggest(name, c.CardNames()), strings.Join(c.CardNames(), ", "))
}
