package report

import (
	"fmt"
	"io"
	"strings"
)

// Tunnels is the site's tunnels as the router showed them (`ocf net`)
// once its IKEv2 tunnels settled: the boot writes its report before they
// come up, then writes it again with this (version 4) when every IKEv2
// tunnel is up or a bounded wait has passed, whichever comes first.
type Tunnels struct {
	// At is when the state was read (the board's clock, UTC), AfterBoot
	// how long after the boot sequence started.
	At        string `json:"at"`
	AfterBoot string `json:"after_boot"`
	// Settled says every IKEv2 tunnel was up; false means the wait's
	// bound passed first, and List says why each is not.
	Settled bool     `json:"settled"`
	List    []Tunnel `json:"list"`
}

// Tunnel is one tunnel: its state ("up", or "down: why") and, keyed by
// IKEv2, its IKE SAs.
type Tunnel struct {
	Name   string  `json:"name"`
	Keying string  `json:"keying"`
	State  string  `json:"state"`
	IKE    []IKESA `json:"ike,omitempty"`
}

// IKESA is an IKE SA as `ocf net` shows it: its state, which end
// started it, the peer's identity and address, the proposal, when it
// was made and last rekeyed, the peer's liveness, NAT, why it failed,
// and its CHILD SAs.
type IKESA struct {
	State       string    `json:"state"`
	Role        string    `json:"role"`
	PeerID      string    `json:"peer_id,omitempty"`
	Remote      string    `json:"remote,omitempty"`
	Proposal    string    `json:"proposal,omitempty"`
	Established string    `json:"established,omitempty"`
	LastRekey   string    `json:"last_rekey,omitempty"`
	Liveness    string    `json:"liveness,omitempty"`
	NAT         string    `json:"nat,omitempty"`
	Error       string    `json:"error,omitempty"`
	Children    []ChildSA `json:"children,omitempty"`
}

// ChildSA is a CHILD SA: its proposal, the kernel driver carrying its
// cipher (the engine the self-test proved, or software), ESP-in-UDP
// ports if any, and its SPIs.
type ChildSA struct {
	Proposal string `json:"proposal"`
	Driver   string `json:"driver,omitempty"`
	Created  string `json:"created,omitempty"`
	Encap    string `json:"encap,omitempty"`
	OutSPI   string `json:"out_spi,omitempty"`
	InSPI    string `json:"in_spi,omitempty"`
}

// WriteTunnels prints the tunnels as the report's text shows them.
func WriteTunnels(w io.Writer, t *Tunnels) {
	how := "every IKEv2 tunnel up"
	if !t.Settled {
		how = "not every IKEv2 tunnel up"
	}
	fmt.Fprintf(w, "tunnels at %s, %s after the boot sequence started (%s):\n", orDash(t.At), orDash(t.AfterBoot), how)
	for _, tu := range t.List {
		fmt.Fprintf(w, "  tunnel %s (%s): %s\n", tu.Name, orDash(tu.Keying), tu.State)
		for _, sa := range tu.IKE {
			var b strings.Builder
			fmt.Fprintf(&b, "    IKE SA %s (%s)", sa.State, orDash(sa.Role))
			if sa.PeerID != "" {
				fmt.Fprintf(&b, " with %s", sa.PeerID)
			}
			if sa.Remote != "" {
				fmt.Fprintf(&b, " at %s", sa.Remote)
			}
			if sa.Proposal != "" {
				fmt.Fprintf(&b, ": %s", sa.Proposal)
			}
			if sa.LastRekey != "" {
				fmt.Fprintf(&b, "; last rekey %s", sa.LastRekey)
			}
			if sa.Liveness != "" {
				fmt.Fprintf(&b, "; %s", sa.Liveness)
			}
			if sa.NAT != "" {
				fmt.Fprintf(&b, "; %s", sa.NAT)
			}
			if sa.Error != "" {
				fmt.Fprintf(&b, "; error: %s", sa.Error)
			}
			fmt.Fprintln(w, b.String())
			for _, c := range sa.Children {
				line := "      CHILD SA " + c.Proposal
				if c.Driver != "" {
					line += ", cipher on " + c.Driver
				}
				if c.Encap != "" {
					line += ", ESP in " + c.Encap
				}
				if c.OutSPI != "" || c.InSPI != "" {
					line += fmt.Sprintf(", spi out %s in %s", orDash(c.OutSPI), orDash(c.InSPI))
				}
				fmt.Fprintln(w, line)
			}
		}
	}
}
