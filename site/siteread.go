package site

import (
	"fmt"

	"github.com/ocfw/ocfw/internal/jsonfile"
	"github.com/ocfw/ocfw/plan"
)

// Read decodes a site config in its JSON form (File in the image,
// CardFile on the card) and checks it against the board's ports. An
// unknown field, a syntax error (with its line and column) and every
// Validate problem are all returned; the site is nil unless there are
// none.
func Read(name string, data []byte, ports []plan.Port) (*Site, []error) {
	var s Site
	if errs := readJSON(name, data, plan.MaxFileSize, "a site config", &s, func() []Error { return s.Validate(ports) }); errs != nil {
		return nil, errs
	}
	return &s, nil
}

// JSON renders the site as the board reads it.
func (s *Site) JSON() ([]byte, error) { return jsonfile.Indent(s) }

// readJSON decodes a contract file into v and then has check look at it:
// a decoding error comes alone, otherwise every problem check finds, each
// naming the file. nil means v is good to use.
func readJSON(name string, data []byte, max int, what string, v any, check func() []Error) []error {
	if err := jsonfile.Decode(name, data, max, what, v); err != nil {
		return []error{err}
	}
	var errs []error
	for _, e := range check() {
		errs = append(errs, fmt.Errorf("%s: %s: %s", name, e.Path, e.Msg))
	}
	return errs
}
