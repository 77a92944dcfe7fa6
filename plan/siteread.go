package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ReadSite decodes a site config in its JSON form (SiteFile in the image,
// SiteCardFile on the card) and checks it against the board's ports. An
// unknown field, a syntax error (with its line and column) and every
// Validate problem are all returned; the site is nil unless there are
// none.
func ReadSite(name string, data []byte, ports []Port) (*Site, []error) {
	if len(data) > MaxFileSize {
		return nil, []error{fmt.Errorf("%s: larger than %d bytes: not a site config", name, MaxFileSize)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Site
	if err := dec.Decode(&s); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			l, c := lineCol(data, syn.Offset-1) // Offset is past the bad byte
			return nil, []error{fmt.Errorf("%s:%d:%d: JSON syntax: %v", name, l, c, syn)}
		case errors.As(err, &typ):
			l, c := lineCol(data, typ.Offset)
			return nil, []error{fmt.Errorf("%s:%d:%d: %s: want %s, got %s", name, l, c, typ.Field, typ.Type, typ.Value)}
		}
		return nil, []error{fmt.Errorf("%s: %v", name, err)}
	}
	if dec.More() {
		return nil, []error{fmt.Errorf("%s: more than one JSON value", name)}
	}
	var errs []error
	for _, e := range s.Validate(ports) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", name, e.Path, e.Msg))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &s, nil
}

// JSON renders the site as the board reads it.
func (s *Site) JSON() ([]byte, error) {
	out, err := json.MarshalIndent(s, "", "  ")
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
