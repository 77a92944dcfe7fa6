package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fqdn lower-cases name and ends it with a dot.
func fqdn(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// buildQuery is an A query for name with recursion desired.
func buildQuery(id uint16, name string) ([]byte, error) {
	n, err := dnsmessage.NewName(fqdn(name))
	if err != nil {
		return nil, kinded("usage", fmt.Errorf("name %q: %w", name, err))
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		return nil, err
	}
	return b.Finish()
}

// parseAnswer returns the reply's A addresses, space-separated, or
// "NXDOMAIN"; ok is false for a message that is not the reply to id.
func parseAnswer(msg []byte, id uint16) (text string, ok bool, err error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || !h.Response || h.ID != id {
		return "", false, nil
	}
	switch h.RCode {
	case dnsmessage.RCodeSuccess:
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN", true, nil
	default:
		return "", true, kinded("rcode", fmt.Errorf("server answered %v", h.RCode))
	}
	if err := p.SkipAllQuestions(); err != nil {
		return "", true, err
	}
	var addrs []string
	for {
		ah, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return "", true, err
		}
		if ah.Type != dnsmessage.TypeA {
			if err := p.SkipAnswer(); err != nil {
				return "", true, err
			}
			continue
		}
		r, err := p.AResource()
		if err != nil {
			return "", true, err
		}
		addrs = append(addrs, net.IP(r.A[:]).String())
	}
	return strings.Join(addrs, " "), true, nil
}

func cmdDNS(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	server := args[1]
	if server == "-" {
		n.mu.Lock()
		dns := n.dns
		n.mu.Unlock()
		if dns == nil {
			return "", kinded("usage", fmt.Errorf("no DNS server learned in %s: run dhcp-client or name one", n.name))
		}
		server = dns.String()
	}
	if net.ParseIP(server) != nil {
		server = net.JoinHostPort(server, "53")
	}
	id := uint16(rand.Uint32())
	q, err := buildQuery(id, args[2])
	if err != nil {
		return "", err
	}
	conn, err := n.dial(ctx, "udp4", server)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	// Three tries, two seconds each, within the command's time.
	for try := 0; ; try++ {
		if _, err := conn.Write(q); err != nil {
			return "", kinded(netKind(err, "failed"), err)
		}
		deadline := time.Now().Add(2 * time.Second)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		conn.SetReadDeadline(deadline)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				if netKind(err, "") == "timeout" && try < 2 && ctx.Err() == nil {
					break
				}
				return "", kinded(netKind(err, "failed"), fmt.Errorf("query %s to %s: %w", args[2], server, err))
			}
			text, ok, err := parseAnswer(buf[:k], id)
			if ok {
				return text, err
			}
		}
	}
}

// dnsRecords maps a lower-case FQDN to its A records.
type dnsRecords map[string][]net.IP

func parseRecords(args []string) (dnsRecords, error) {
	recs := dnsRecords{}
	for _, a := range args {
		name, ips, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("record %q: want NAME=IP[,IP]", a)
		}
		if _, err := dnsmessage.NewName(fqdn(name)); err != nil {
			return nil, fmt.Errorf("record %q: %w", a, err)
		}
		for _, s := range strings.Split(ips, ",") {
			ip := net.ParseIP(s).To4()
			if ip == nil {
				return nil, fmt.Errorf("record %q: %q is not an IPv4 address", a, s)
			}
			recs[fqdn(name)] = append(recs[fqdn(name)], ip)
		}
	}
	return recs, nil
}

// answer builds the reply to a query: the name's A records, an empty
// answer for another type of a known name, NXDOMAIN for an unknown
// name; nil for what is not a query. It also says what was asked.
func (recs dnsRecords) answer(msg []byte) (reply []byte, asked string) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response || h.OpCode != 0 {
		return nil, ""
	}
	q, err := p.Question()
	if err != nil {
		return nil, ""
	}
	name := strings.ToLower(q.Name.String())
	asked = strings.TrimPrefix(q.Type.String(), "Type") + " " + name
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	ips, known := recs[name]
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, asked
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, ip := range ips {
			var a dnsmessage.AResource
			copy(a.A[:], ip.To4())
			if b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, a) != nil {
				return nil, asked
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil, asked
	}
	return out, asked
}

func cmdDNSServer(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	recs, err := parseRecords(args[1:])
	if err != nil {
		return "", kinded("usage", err)
	}
	conn, err := n.listenUDP(":53")
	if err != nil {
		return "", err
	}
	if err := n.addService("dns-server", conn); err != nil {
		return "", err
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			reply, asked := recs.answer(buf[:k])
			n.event("dns %s from %s", asked, from)
			if reply != nil {
				conn.WriteTo(reply, from)
			}
		}
	}()
	return fmt.Sprintf("dns-server on udp 53 with %d names", len(recs)), nil
}
