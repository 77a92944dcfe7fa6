package boards

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// pos is a 1-based line and column in a profile file.
type pos struct{ line, col int }

// positions maps a field path ("cpu.arch", "slots[1].form") to where its
// value stands, so checks made after decoding can still point at the file.
type positions map[string]pos

// decoder decodes a yaml.Node into a struct strictly: every key must be a
// field, every value must have the field's type. Unlike yaml.v3's
// KnownFields it reports all problems with line and column, names the
// valid fields and suggests the nearest one.
type decoder struct {
	file string
	what string // "board profile" / "card profile", for messages
	pos  positions
	errs ErrorList
	// bad holds the paths already reported: values that did not decode,
	// and fields an unknown key was probably meant to be ("ram" for
	// "ram_mb"), so that their zero values are not reported again.
	bad map[string]bool
}

// fail reports a value that could not be decoded at path, and marks the
// path so that the checks made after decoding do not report it again.
func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.errorf(n, format, args...)
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)})
}

// yamlFields lists a struct's YAML keys with their field indexes.
func yamlFields(t reflect.Type) (names []string, index map[string]int) {
	index = map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		names = append(names, tag)
		index[tag] = i
	}
	return names, index
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list"
	case reflect.Struct:
		return "a mapping of fields"
	}
	return t.String()
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing (null)"
	}
	return quote(n.Value)
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		d.fail(n, path, "%s: YAML aliases are not supported in profiles; write the value out", displayPath(path))
		return
	}
	d.pos[path] = pos{n.Line, n.Column}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "%s: want %s, got %s", displayPath(path), kindName(v.Type()), nodeKind(n))
			return
		}
		names, index := yamlFields(v.Type())
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := k.Value
			fi, ok := index[key]
			if !ok {
				d.errorf(k, "unknown field %s in %s%s; valid fields: %s", quote(key), d.where(path), suggest(key, names), strings.Join(names, ", "))
				if meant := catalog.Nearest(key, names); meant != "" {
					d.bad[joinPath(path, meant)] = true
				}
				continue
			}
			if seen[key] {
				d.errorf(k, "field %q given twice in %s", key, d.where(path))
				continue
			}
			seen[key] = true
			d.decode(val, v.Field(fi), joinPath(path, key))
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "%s: want a list, got %s", displayPath(path), nodeKind(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, el := range n.Content {
			d.decode(el, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			d.fail(n, path, "%s: want a string, got %s", displayPath(path), nodeKind(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.fail(n, path, "%s: want an integer, got %s", displayPath(path), nodeKind(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil || i < 0 || i > 1<<40 {
			d.fail(n, path, "%s: %s is not a usable integer (want 0 to 2^40, decimal or 0x hex)", displayPath(path), quote(n.Value))
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.fail(n, path, "%s: want true or false, got %s", displayPath(path), nodeKind(n))
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	case reflect.Pointer:
		// An optional value: left nil when absent or null.
		if n.Tag == "!!null" {
			return
		}
		e := reflect.New(v.Type().Elem())
		d.decode(n, e.Elem(), path)
		v.Set(e)
	default:
		d.fail(n, path, "%s: internal: cannot decode into %s", displayPath(path), v.Type())
	}
}

func (d *decoder) where(path string) string {
	if path == "" {
		return d.what
	}
	return fmt.Sprintf("%q of the %s", path, d.what)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func displayPath(path string) string {
	if path == "" {
		return "profile"
	}
	return fmt.Sprintf("field %q", path)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a yaml.v3 parse error into a located Error.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: "YAML syntax: " + m[2]}
	}
	return &Error{File: file, Msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: ")}
}
