package sshd

import (
	"fmt"
	"strings"
	"testing"
)

// lostKeys is a store found lost at this boot: nothing to load, and it
// says why.
type lostKeys struct{ memKeys }

func (l *lostKeys) Load() ([]byte, bool, error) {
	if l.ok {
		return l.memKeys.Load()
	}
	return nil, false, fmt.Errorf("host key: %w", ErrStoreLost)
}

// TestHostKeyAfterALostStore: the key made after the card's state was
// lost is announced as NEW, with its fingerprint, never as a first
// boot's key.
func TestHostKeyAfterALostStore(t *testing.T) {
	ks := &lostKeys{}
	var log logBuf
	k, err := LoadHostKey(ks, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	want := "ssh: WARNING: the card's state was lost; made a NEW SSH host key " + Fingerprint(k.PublicKey()) + ": SSH clients will warn that the host key changed"
	if l := log.String(); !strings.Contains(l, want) || strings.Contains(l, "made a new host key") {
		t.Fatalf("log %q; want %q", l, want)
	}
	if ks.saves != 1 {
		t.Errorf("the new key was saved %d times, want 1", ks.saves)
	}
}
