package ra

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/ocfw/ocfw/site"
)

// ValueStore keeps named values power-safe (the board's store.Store).
type ValueStore interface {
	Value(name string, v any) (bool, error)
	SetValue(name string, v any) error
}

// ULAValue is the store's name for the ULA drawn on the box.
const ULAValue = "ipv6-ula"

// ULA is the LAN's unique local /48 for the site's ipv6.ula setting:
// invalid for "off", the site's own when it names one, else the one
// kept in st, drawn from rnd (crypto/rand when nil) and kept the first
// time. RFC 4193 wants it drawn once and kept: local names keep their
// addresses across reboots. With no store (st nil) one is drawn for
// this boot only, and the error says so.
func ULA(setting string, st ValueStore, rnd io.Reader) (netip.Prefix, error) {
	switch setting {
	case site.ULAOff:
		return netip.Prefix{}, nil
	case "":
	default:
		return site.ParseULA(setting)
	}
	if st != nil {
		var kept string
		ok, err := st.Value(ULAValue, &kept)
		if err == nil && ok {
			if p, err := site.ParseULA(kept); err == nil {
				return p, nil
			}
		}
	}
	p, err := site.NewULA(rnd)
	if err != nil {
		return netip.Prefix{}, err
	}
	if st == nil {
		return p, fmt.Errorf("ra: no store: the ULA %s lasts this boot only", p)
	}
	if err := st.SetValue(ULAValue, p.String()); err != nil {
		return p, fmt.Errorf("ra: keeping the ULA %s: %w (it lasts this boot only)", p, err)
	}
	return p, nil
}
