package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// readJSON decodes data, the board's JSON form of a contract file, into
// v and then has check look at v. The file must be at most max bytes
// (what says what it should be, for that message) and one JSON value
// without unknown fields. A decoding error comes alone, with the line and
// column where the JSON has them; otherwise every problem check finds is
// returned. Each error names the file; nil means v is good to use.
func readJSON(name string, data []byte, max int, what string, v any, check func() []SiteError) []error {
	if len(data) > max {
		return []error{fmt.Errorf("%s: larger than %d bytes: not %s", name, max, what)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			l, c := lineCol(data, syn.Offset-1) // Offset is past the bad byte
			return []error{fmt.Errorf("%s:%d:%d: JSON syntax: %v", name, l, c, syn)}
		case errors.As(err, &typ):
			l, c := lineCol(data, typ.Offset)
			return []error{fmt.Errorf("%s:%d:%d: %s: want %s, got %s", name, l, c, typ.Field, typ.Type, typ.Value)}
		}
		return []error{fmt.Errorf("%s: %v", name, err)}
	}
	if dec.More() {
		return []error{fmt.Errorf("%s: more than one JSON value", name)}
	}
	var errs []error
	for _, e := range check() {
		errs = append(errs, fmt.Errorf("%s: %s: %s", name, e.Path, e.Msg))
	}
	return errs
}

// indentJSON renders v as the board reads it: indented, with a trailing
// newline.
func indentJSON(v any) ([]byte, error) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func lineCol(data []byte, off int64) (int, int) {
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
