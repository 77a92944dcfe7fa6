// Package jsonfile decodes and writes the JSON files the host and the
// board exchange (plan, site config, tunnel keys): strictly, bounded in
// size, with the line and column of a mistake.
package jsonfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Decode decodes data, the board's JSON form of a contract file, into v.
// The file must be at most max bytes (what says what it should be, for
// that message) and one JSON value without unknown fields. The error names
// the file and, where the JSON decoder has them, the line and column.
func Decode(name string, data []byte, max int, what string, v any) error {
	if len(data) > max {
		return fmt.Errorf("%s: larger than %d bytes: not %s", name, max, what)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			l, c := LineCol(data, syn.Offset-1) // Offset is past the bad byte
			return fmt.Errorf("%s:%d:%d: JSON syntax: %v", name, l, c, syn)
		case errors.As(err, &typ):
			l, c := LineCol(data, typ.Offset)
			want := typ.Type.String()
			if typ.Type.Kind() == reflect.String {
				want = "string" // not the Go name of a typed string (site.WANAddress)
			}
			return fmt.Errorf("%s:%d:%d: %s: want %s, got %s", name, l, c, typ.Field, want, typ.Value)
		}
		return fmt.Errorf("%s: %v", name, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: more than one JSON value", name)
	}
	return nil
}

// Indent renders v as the board reads it: indented, with a trailing
// newline.
func Indent(v any) ([]byte, error) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// LineCol turns a byte offset in data into a 1-based line and column.
func LineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col := 1, 1
	for _, b := range data[:off] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
