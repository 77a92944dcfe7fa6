package dhcp6

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"
)

type mapStore struct {
	m      map[string][]byte
	writes int
}

func (s *mapStore) Value(name string, v any) (bool, error) {
	b, ok := s.m[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (s *mapStore) SetValue(name string, v any) error {
	b, err := json.Marshal(v)
	s.m[name], s.writes = b, s.writes+1
	return err
}

// TestDHCPv6LeaseInStore: the lease survives the JSON of the store, and a
// renewal that changes nothing but the times is not written again.
func TestDHCPv6LeaseInStore(t *testing.T) {
	ms := &mapStore{m: map[string][]byte{}}
	st := InStore(ms)
	if l, err := st.Load(); l != nil || err != nil {
		t.Fatalf("empty store: %+v, %v", l, err)
	}
	l := &Lease{ServerID: []byte{0, 3, 0, 1, 2, 3, 4, 5, 6, 7}, Obtained: time.Now().Round(0), T1: 10 * time.Second, T2: 16 * time.Second,
		Prefix: netip.MustParsePrefix("2001:db8:100:b0::/60"), PrefixValid: time.Hour, PrefixPreferred: 30 * time.Minute,
		DNS: []netip.Addr{netip.MustParseAddr("2001:db8::53")}}
	if err := st.Save(l); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load()
	if err != nil || got == nil || got.Prefix != l.Prefix || got.PrefixValid != l.PrefixValid || string(got.ServerID) != string(l.ServerID) || !got.Obtained.Equal(l.Obtained) || got.Address.IsValid() {
		t.Fatalf("loaded %+v, %v; saved %+v", got, err, l)
	}
	renewed := *l
	renewed.Obtained = l.Obtained.Add(10 * time.Second)
	st.Save(&renewed)
	changed := renewed
	changed.Prefix = netip.MustParsePrefix("2001:db8:200:f0::/60")
	st.Save(&changed)
	if ms.writes != 2 {
		t.Errorf("%d writes for a new lease, a renewal and a change; want 2", ms.writes)
	}
}
