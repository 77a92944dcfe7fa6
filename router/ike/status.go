package ike

import (
	"fmt"
	"net/netip"
	"sort"
	"time"
)

// PeerStatus is one configured peer's IKE state, for `ocf net`.
type PeerStatus struct {
	Name string
	SAs  []SAStatus
	// LastError is the latest failure (authentication, proposals, a dead
	// peer); empty once an IKE SA comes up.
	LastError       string
	LastEstablished time.Time
}

// SAStatus is one IKE SA.
type SAStatus struct {
	State                               string // connecting, authenticating, half-open, established, rekeyed, closing, deleting
	Initiator                           bool
	SPIi, SPIr                          uint64
	PeerID                              string
	Remote                              netip.AddrPort
	Proposal                            string // the IKE SA's suite
	Established, LastRekey, LastInbound time.Time
	// Alive is false while a request to the peer is being retransmitted.
	Alive bool
	// NATLocal/NATRemote: a NAT was detected before us / the peer; UDPEncap
	// the SA moved to the NAT-T port.
	NATLocal, NATRemote, UDPEncap bool
	Children                      []ChildStatus
	Error                         string
}

// ChildStatus is one CHILD SA (no keys).
type ChildStatus struct {
	InSPI, OutSPI uint32
	Proposal      string
	Created       time.Time
	Encap         *Encap
	Rekeyed       bool // replaced; its delete is on the way
}

func (s SAStatus) String() string {
	return fmt.Sprintf("%s %016x_%016x peer %s %s children %d", s.State, s.SPIi, s.SPIr, s.PeerID, s.Proposal, len(s.Children))
}

// Status reports every peer and its IKE SAs.
func (e *Endpoint) Status() []PeerStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []PeerStatus
	for _, p := range e.peers {
		ps := PeerStatus{Name: p.cfg.Name, LastError: p.lastErr, LastEstablished: p.lastEstablished}
		for _, sa := range e.sasOf(p) {
			s := SAStatus{State: sa.state.String(), Initiator: sa.initiator, SPIi: sa.spii, SPIr: sa.spir,
				Remote: sa.remote, Established: sa.established, LastRekey: sa.lastRekey, LastInbound: sa.lastIn,
				Alive: sa.pending == nil || sa.pending.sent <= 1, NATLocal: sa.natLocal, NATRemote: sa.natRemote,
				UDPEncap: sa.natt, Error: sa.err}
			if sa.state == stateEstablished || sa.state.retiring() {
				s.PeerID = sa.peerID.String()
			}
			if sa.suite != nil {
				s.Proposal = sa.suite.String()
			}
			for _, c := range sa.children {
				s.Children = append(s.Children, ChildStatus{InSPI: c.sa.InSPI, OutSPI: c.sa.OutSPI, Proposal: c.suite,
					Created: c.created, Encap: c.sa.Encap, Rekeyed: c.replaced})
			}
			ps.SAs = append(ps.SAs, s)
		}
		sort.Slice(ps.SAs, func(i, j int) bool { return ps.SAs[i].Established.Before(ps.SAs[j].Established) })
		out = append(out, ps)
	}
	return out
}
