package plan

// ReadSite decodes a site config in its JSON form (SiteFile in the image,
// SiteCardFile on the card) and checks it against the board's ports. An
// unknown field, a syntax error (with its line and column) and every
// Validate problem are all returned; the site is nil unless there are
// none.
func ReadSite(name string, data []byte, ports []Port) (*Site, []error) {
	var s Site
	if errs := readJSON(name, data, MaxFileSize, "a site config", &s, func() []SiteError { return s.Validate(ports) }); errs != nil {
		return nil, errs
	}
	return &s, nil
}

// JSON renders the site as the board reads it.
func (s *Site) JSON() ([]byte, error) { return indentJSON(s) }
