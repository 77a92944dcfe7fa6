package router

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/router/sshd"
)

// memValues is the board's store in RAM; lost says it was found lost.
type memValues struct {
	v    map[string]json.RawMessage
	lost bool
}

func (m *memValues) SetValue(name string, v any) error {
	b, err := json.Marshal(v)
	m.v[name] = b
	return err
}

func (m *memValues) Value(name string, v any) (bool, error) {
	b, ok := m.v[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (m *memValues) StateLost() bool { return m.lost }

// TestLostStoreMakesALoudNewHostKey: after the card's state was lost
// the new host key is a warning in the log and in ocf net's ssh line,
// with its fingerprint; on a fresh card it is a first boot's key.
func TestLostStoreMakesALoudNewHostKey(t *testing.T) {
	for _, lost := range []bool{true, false} {
		t.Run(fmt.Sprintf("lost=%v", lost), func(t *testing.T) {
			vals := &memValues{v: map[string]json.RawMessage{}, lost: lost}
			var log strings.Builder
			logf := func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }
			hk, err := sshd.LoadHostKey(valueKeys{vals}, logf)
			if err != nil {
				t.Fatal(err)
			}
			fp := sshd.Fingerprint(hk.PublicKey())
			if _, ok := vals.v[valueHostKey]; !ok {
				t.Fatal("the new key was not kept")
			}
			status := sshStatus([]string{"192.168.1.1:22"}, 1, vals, fp)
			warned := strings.Contains(log.String(), "state was lost; made a NEW SSH host key "+fp)
			inStatus := strings.Contains(status, "NEW SSH host key "+fp)
			if warned != lost || inStatus != lost {
				t.Fatalf("lost %v: log %q, status %q", lost, log.String(), status)
			}
			if !lost && !strings.Contains(log.String(), "made a new host key "+fp) {
				t.Errorf("first boot's log: %q", log.String())
			}
		})
	}
}
