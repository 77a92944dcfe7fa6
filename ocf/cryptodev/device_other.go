//go:build !linux

package cryptodev

import (
	"fmt"

	"github.com/ocfw/ocfw/ocf"
)

// OpenDevice fails: /dev/crypto as this package speaks it exists on Linux
// only.
func OpenDevice(path string) (Device, error) {
	return nil, fmt.Errorf("%w: /dev/crypto needs Linux", ocf.ErrUnsupported)
}
