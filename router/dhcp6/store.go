package dhcp6

// ValueStore keeps named values power-safe (the board's store.Store).
type ValueStore interface {
	Value(name string, v any) (bool, error)
	SetValue(name string, v any) error
}

// LeaseValue is the store's name for the WAN's DHCPv6 lease.
const LeaseValue = "dhcp6-lease"

// InStore keeps the lease in st under LeaseValue: a Store for Config.
func InStore(st ValueStore) Store { return valueStore{st} }

type valueStore struct{ st ValueStore }

func (v valueStore) Load() (*Lease, error) {
	var l Lease
	ok, err := v.st.Value(LeaseValue, &l)
	if err != nil || !ok {
		return nil, err
	}
	return &l, nil
}

// Save writes only what differs from the kept lease but its times: a
// renewal that changes nothing but Obtained costs no write on the card
// (a 30-minute T1 would otherwise write the state 48 times a day).
func (v valueStore) Save(l *Lease) error {
	if old, err := v.Load(); err == nil && old != nil && sameBinding(old, l) {
		return nil
	}
	return v.st.SetValue(LeaseValue, l)
}

// sameBinding says whether a and b hold the same server, prefix and
// address: what a reboot asks for again.
func sameBinding(a, b *Lease) bool {
	return string(a.ServerID) == string(b.ServerID) && a.Prefix == b.Prefix && a.Address == b.Address
}
