package ike

import (
	"errors"
	"fmt"
)

// ErrNoProposal is no acceptable proposal: the answer is NO_PROPOSAL_CHOSEN.
var ErrNoProposal = errors.New("ike: no proposal acceptable (NO_PROPOSAL_CHOSEN)")

// Choose is the responder's choice (RFC 7296 2.7, 3.3.6): our proposals in
// our order of preference, each listing the transforms we accept per type,
// also in preference order; the first of ours that one of the peer's
// proposals (of the same protocol) satisfies wins. The answer carries the
// peer's proposal number and SPI (the caller puts its own SPI in) and one
// transform of each type the peer's proposal has. A peer transform with an
// attribute other than the key length is never chosen (3.3.6).
func Choose(ours, theirs []Proposal) (Proposal, error) {
	for _, o := range ours {
		for _, t := range theirs {
			if t.Protocol != o.Protocol {
				continue
			}
			if c, ok := match(o, t); ok {
				return c, nil
			}
		}
	}
	return Proposal{}, ErrNoProposal
}

func match(ours, theirs Proposal) (Proposal, bool) {
	c := Proposal{Num: theirs.Num, Protocol: theirs.Protocol, SPI: theirs.SPI}
	for _, t := range theirs.Transforms {
		if !hasType(ours, t.Type) {
			return Proposal{}, false // we would have to choose one we do not know
		}
	}
	var done []TransformType
	for _, o := range ours.Transforms {
		if containsType(done, o.Type) {
			continue
		}
		if !hasType(theirs, o.Type) {
			// An absent DH or ESN type means NONE: fine if we list NONE.
			if !hasID(ours, o.Type, 0) || (o.Type != TransformDH && o.Type != TransformESN) {
				return Proposal{}, false
			}
			done = append(done, o.Type)
			continue
		}
		if offered(theirs, o) {
			c.Transforms = append(c.Transforms, o)
			done = append(done, o.Type)
		}
	}
	for _, t := range theirs.Transforms {
		if !containsType(done, t.Type) {
			return Proposal{}, false
		}
	}
	return c, true
}

func containsType(ts []TransformType, t TransformType) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func hasType(p Proposal, t TransformType) bool {
	for _, x := range p.Transforms {
		if x.Type == t {
			return true
		}
	}
	return false
}

func hasID(p Proposal, t TransformType, id uint16) bool {
	for _, x := range p.Transforms {
		if x.Type == t && x.ID == id {
			return true
		}
	}
	return false
}

// offered reports whether p has transform o with the same key length and
// no other attribute.
func offered(p Proposal, o Transform) bool {
	ok, has := o.KeyLength()
	for _, t := range p.Transforms {
		if t.Type != o.Type || t.ID != o.ID {
			continue
		}
		tk, thas := t.KeyLength()
		if tk == ok && thas == has && len(t.Attrs) == boolInt(thas) {
			return true
		}
	}
	return false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CheckChosen is the initiator's check of the responder's answer: a
// single proposal, numbered as one we sent, with exactly one transform per
// type that proposal holds, each of them offered there.
func CheckChosen(offeredList []Proposal, chosen []Proposal) (Proposal, error) {
	if len(chosen) != 1 {
		return Proposal{}, fmt.Errorf("ike: the responder chose %d proposals, want 1", len(chosen))
	}
	c := chosen[0]
	for _, o := range offeredList {
		if o.Num != c.Num || o.Protocol != c.Protocol {
			continue
		}
		seen := map[TransformType]bool{}
		for _, t := range c.Transforms {
			if seen[t.Type] || !offered(o, t) {
				return Proposal{}, fmt.Errorf("ike: the responder chose %s, which proposal %d did not offer once", t, o.Num)
			}
			seen[t.Type] = true
		}
		for _, t := range o.Transforms {
			if !seen[t.Type] {
				return Proposal{}, fmt.Errorf("ike: the responder chose no %s transform", t.Type)
			}
		}
		return c, nil
	}
	return Proposal{}, fmt.Errorf("ike: the responder chose proposal %d, which was not offered", c.Num)
}

// CheckOffer is the responder's check of an SA payload it was offered
// (3.3.1): proposals numbered 1, 2, ... and each proposal's SPI of the size
// its protocol uses: none for a new IKE SA, 8 bytes when rekeying one
// (rekeyIKE), 4 for ESP and AH.
func CheckOffer(ps []Proposal, rekeyIKE bool) error {
	if len(ps) == 0 {
		return fmt.Errorf("ike: an SA payload without a proposal")
	}
	for i, p := range ps {
		if int(p.Num) != i+1 {
			return fmt.Errorf("ike: proposal %d is numbered %d", i+1, p.Num)
		}
		want := 4
		if p.Protocol == ProtoIKE {
			want = 0
			if rekeyIKE {
				want = 8
			}
		}
		if len(p.SPI) != want {
			return fmt.Errorf("ike: proposal %d (protocol %d) has an SPI of %d bytes, want %d", p.Num, p.Protocol, len(p.SPI), want)
		}
		if len(p.Transforms) == 0 {
			return fmt.Errorf("ike: proposal %d has no transform", p.Num)
		}
	}
	return nil
}
