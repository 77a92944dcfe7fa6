package ra

import (
	"bytes"
	"encoding/json"
	"testing"
)

type mapStore map[string][]byte

func (m mapStore) Value(name string, v any) (bool, error) {
	b, ok := m[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (m mapStore) SetValue(name string, v any) error {
	b, err := json.Marshal(v)
	m[name] = b
	return err
}

// TestIPv6ULAKept: the ULA is drawn once, kept, and the same on the next
// boot; the site's own or off wins; a damaged kept value is replaced.
func TestIPv6ULAKept(t *testing.T) {
	st := mapStore{}
	first, err := ULA("", st, bytes.NewReader([]byte{1, 2, 3, 4, 5}))
	if err != nil || first.String() != "fd01:203:405::/48" {
		t.Fatalf("first boot: %s, %v", first, err)
	}
	// The next boot draws nothing: a reader that fails proves it.
	again, err := ULA("", st, bytes.NewReader(nil))
	if err != nil || again != first {
		t.Errorf("second boot: %s, %v; want %s", again, err, first)
	}
	if p, err := ULA("fd12:3456:789a::/48", st, nil); err != nil || p.String() != "fd12:3456:789a::/48" {
		t.Errorf("the site's own: %s, %v", p, err)
	}
	if p, err := ULA("off", st, nil); err != nil || p.IsValid() {
		t.Errorf("off: %s, %v", p, err)
	}
	st[ULAValue] = []byte(`"fc00::/48"`)
	if p, err := ULA("", st, bytes.NewReader([]byte{9, 9, 9, 9, 9})); err != nil || p.String() != "fd09:909:909::/48" || string(st[ULAValue]) != `"fd09:909:909::/48"` {
		t.Errorf("damaged kept value: %s, %v, kept %s", p, err, st[ULAValue])
	}
	if p, err := ULA("", nil, nil); err == nil || !p.IsValid() {
		t.Errorf("no store: %s, %v; want a ULA and an error saying it is not kept", p, err)
	}
}
