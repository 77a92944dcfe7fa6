package main

// A manually keyed tunnel's ocfw end in a namespace of the world, as the
// router sets it up (router/ipsec's Seqs over a store): against a Linux
// peer set up with Debian's ip from what `ocfw tunnel keys
// --peer-commands` prints (package strongswan's test). The store is a
// file the agent rewrites whole and syncs on each write: a restart of
// the ocfw end is remove, then install from the same file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ocfw/ocfw/router/ipsec"
)

// fileValues is ipsec.Values in one JSON file, replaced atomically.
type fileValues struct{ path string }

func (f fileValues) all() (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	return m, json.Unmarshal(b, &m)
}

func (f fileValues) Value(name string, v any) (bool, error) {
	m, err := f.all()
	if err != nil {
		return false, err
	}
	raw, ok := m[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}

func (f fileValues) SetValue(name string, v any) error {
	m, err := f.all()
	if err != nil {
		return err
	}
	if m[name], err = json.Marshal(v); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := f.path + ".new"
	fd, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fd.Write(b); err != nil {
		fd.Close()
		return err
	}
	if err := fd.Sync(); err != nil {
		fd.Close()
		return err
	}
	if err := fd.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}

// ManualReply is the manual command's answer: the tunnel's kernel
// counters after the action and what the store holds for its keys.
type ManualReply struct {
	Counters          ipsec.TunnelCounters
	SavedOut, SavedIn uint64
	Saved             bool
}

// cmdManual: manual NS STORE install|check|remove TUNNEL-JSON. install is
// the router's boot (Seqs.Install from the store), check its periodic
// Seqs.Check (the inbound counter saved every time), remove takes the
// SAs and policies out (the box going down).
func cmdManual(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	var t ipsec.Tunnel
	if err := json.Unmarshal([]byte(args[3]), &t); err != nil {
		return "", kinded("usage", fmt.Errorf("tunnel: %w", err))
	}
	h, err := ipsec.OpenInNetNS(n.fd)
	if err != nil {
		return "", err
	}
	defer h.Close()
	s := ipsec.NewSeqs(fileValues{args[1]}, "")
	s.InSaveEvery = time.Nanosecond
	switch args[2] {
	case "install":
		err = s.Install(h, t)
	case "check":
		_, _, err = s.Check(h, t)
	case "remove":
		if err := h.Remove(t); err != nil {
			return "", err
		}
		return "removed", nil
	default:
		return "", kinded("usage", fmt.Errorf("manual: %q: want install, check or remove", args[2]))
	}
	if err != nil {
		return "", err
	}
	var r ManualReply
	if r.Counters, err = h.Counters(t); err != nil {
		return "", err
	}
	if r.SavedOut, r.SavedIn, r.Saved, err = s.Saved(t); err != nil {
		return "", err
	}
	b, err := json.Marshal(r)
	return string(b), err
}
