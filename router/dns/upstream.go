package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// forward asks each upstream in turn; the first well-formed answer to
// this question wins.
func (f *Forwarder) forward(ctx context.Context, qu query) (*dnsmessage.Message, bool) {
	f.mu.Lock()
	ups := append([]netip.AddrPort(nil), f.upstreams...)
	f.mu.Unlock()
	if len(ups) == 0 && f.cfg.Logf != nil {
		f.cfg.Logf("dns: no upstream resolver yet (the WAN has none)")
	}
	for _, u := range ups {
		f.upstream.Add(1)
		m, err := f.exchange(ctx, u, qu)
		if err == nil {
			return m, true
		}
		if f.cfg.Logf != nil {
			f.cfg.Logf("dns: upstream %s: %v", u, err)
		}
	}
	return nil, false
}

// upstreamQuery is the query sent upstream for qu: a fresh random ID
// (so a spoofed answer must guess it as well as the port), the client's
// question, RD, CD and DO, and EDNS with this forwarder's size whatever
// the client's: the answer is then the same for every client, and the
// cache can cut it to each one's size.
func upstreamQuery(qu query) (uint16, []byte, error) {
	id := uint16(rand.Uint32())
	var opt dnsmessage.ResourceHeader
	opt.Name = dnsmessage.MustNewName(".")
	opt.SetEDNS0(ednsSize, dnsmessage.RCodeSuccess, qu.do)
	m := dnsmessage.Message{
		Header:      dnsmessage.Header{ID: id, RecursionDesired: true, CheckingDisabled: qu.h.CheckingDisabled},
		Questions:   []dnsmessage.Question{qu.q},
		Additionals: []dnsmessage.Resource{{Header: opt, Body: &dnsmessage.OPTResource{}}},
	}
	b, err := m.Pack()
	return id, b, err
}

var errTruncated = errors.New("truncated over UDP")

// exchange asks u over UDP, and over TCP when the UDP answer is
// truncated or larger than the size offered.
func (f *Forwarder) exchange(ctx context.Context, u netip.AddrPort, qu query) (*dnsmessage.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	id, q, err := upstreamQuery(qu)
	if err != nil {
		return nil, err
	}
	m, err := f.exchangeUDP(ctx, u, q, id, qu.q)
	if errors.Is(err, errTruncated) {
		f.upTCP.Add(1)
		return f.exchangeTCP(ctx, u, q, id, qu.q)
	}
	return m, err
}

func (f *Forwarder) exchangeUDP(ctx context.Context, u netip.AddrPort, q []byte, id uint16, question dnsmessage.Question) (*dnsmessage.Message, error) {
	c, err := f.cfg.Dial(ctx, "udp", u.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(q); err != nil {
		return nil, err
	}
	// The buffer holds what was offered and one byte more: a longer
	// datagram (an upstream ignoring EDNS) is cut by the read, and is
	// asked again over TCP rather than parsed broken.
	buf := make([]byte, ednsSize+1)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		var h dnsmessage.Header
		var p dnsmessage.Parser
		if h, err = p.Start(buf[:n]); err != nil || !h.Response || h.ID != id {
			continue // a reply to another question (spoofed, or late)
		}
		if n > ednsSize || h.Truncated {
			return nil, errTruncated
		}
		m, err := parseAnswer(buf[:n], id, question)
		if err != nil {
			continue
		}
		return m, nil
	}
}

func (f *Forwarder) exchangeTCP(ctx context.Context, u netip.AddrPort, q []byte, id uint16, question dnsmessage.Question) (*dnsmessage.Message, error) {
	c, err := f.cfg.Dial(ctx, "tcp", u.String())
	if err != nil {
		return nil, fmt.Errorf("over TCP (its UDP answer was truncated): %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, fmt.Errorf("over TCP: %w", err)
	}
	buf := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, fmt.Errorf("over TCP: %w", err)
	}
	return parseAnswer(buf, id, question)
}

// parseAnswer takes an upstream's reply if it answers this query.
func parseAnswer(b []byte, id uint16, question dnsmessage.Question) (*dnsmessage.Message, error) {
	var m dnsmessage.Message
	if err := m.Unpack(b); err != nil {
		return nil, fmt.Errorf("malformed answer: %w", err)
	}
	if !m.Response || m.ID != id || len(m.Questions) != 1 || m.Questions[0].Type != question.Type ||
		m.Questions[0].Class != question.Class || !strings.EqualFold(m.Questions[0].Name.String(), question.Name.String()) {
		return nil, errors.New("an answer to another question")
	}
	return &m, nil
}
