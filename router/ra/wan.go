package ra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/ipv6"
)

// RFC 4861 section 10's host constants: a host sends up to three
// solicitations four seconds apart, then waits for periodic ones.
const (
	rtrSolicitationInterval = 4 * time.Second
	maxRtrSolicitations     = 3
)

// WANConfig says where a Listen runs and whom it tells.
type WANConfig struct {
	// Interface is the WAN's interface.
	Interface string
	// Heard is told each valid advertisement, with its sender's
	// link-local address. It must not block for long.
	Heard func(from netip.Addr, a Advert)
	// Log reports problems; nil for none.
	Log func(format string, args ...any)
	// SolicitInterval is the time between the first solicitations
	// (default RFC 4861's 4 s).
	SolicitInterval time.Duration
}

// Listen hears the ISP's router advertisements on the WAN until ctx
// ends: it solicits at once (up to three times, until one answers, RFC
// 4861 section 6.3.7) and then keeps reading the periodic ones. The
// router needs what the kernel's SLAAC does not give it: the M and O
// flags (whether to ask DHCPv6 for an address, or only for other
// configuration) and the resolvers (RDNSS). Advertisements that fail
// RFC 4861's checks (hop limit, link-local source) are skipped. It must
// run in the WAN interface's network namespace.
func Listen(ctx context.Context, cfg WANConfig) error {
	if cfg.Interface == "" {
		return errors.New("ra: no WAN interface")
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Heard == nil {
		cfg.Heard = func(netip.Addr, Advert) {}
	}
	if cfg.SolicitInterval == 0 {
		cfg.SolicitInterval = rtrSolicitationInterval
	}
	// The interface may come up (and out of duplicate address
	// detection) after the router starts: wait for it.
	var ifi *net.Interface
	var pc *ipv6.PacketConn
	for logged := false; ; {
		var err error
		if ifi, err = net.InterfaceByName(cfg.Interface); err == nil {
			if pc, err = listenWAN(ctx, ifi); err == nil {
				break
			}
		}
		if !logged {
			cfg.Log("ra: WAN %s not ready: %v (waiting)", cfg.Interface, err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	defer pc.Close()
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()

	heard, done := make(chan struct{}, 1), make(chan struct{})
	defer close(done)
	go func() {
		rs := []byte{typeRS, 0, 0, 0, 0, 0, 0, 0}
		for sent := 0; sent < maxRtrSolicitations; {
			// From the link-local address (which the solicitation
			// needs, else it must carry no link-layer option): until
			// the address is out of DAD, try again each second.
			src, err := linkLocal(ifi)
			if err == nil {
				cm := &ipv6.ControlMessage{IfIndex: ifi.Index, HopLimit: 255, Src: src}
				_, err = pc.WriteTo(rs, cm, &net.IPAddr{IP: allRouters, Zone: ifi.Name})
			}
			wait := cfg.SolicitInterval
			if err != nil {
				wait = time.Second
			} else {
				sent++
			}
			select {
			case <-done:
				return
			case <-heard:
				return
			case <-time.After(wait):
			}
		}
	}()

	buf := make([]byte, 1500)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("ra: reading on %s: %w", ifi.Name, err)
		}
		from, _ := netip.AddrFromSlice(src.(*net.IPAddr).IP)
		hop := -1
		if cm != nil {
			hop = cm.HopLimit
		}
		a, err := Parse(buf[:n], from, hop)
		if err != nil {
			cfg.Log("ra: an advertisement from %s on %s skipped: %v", from, ifi.Name, err)
			continue
		}
		select {
		case heard <- struct{}{}:
		default:
		}
		cfg.Heard(from.WithZone(ifi.Name), a)
	}
}

// listenWAN opens a raw ICMPv6 socket on ifi taking in router
// advertisements only, sending with hop limit 255.
func listenWAN(ctx context.Context, ifi *net.Interface) (*ipv6.PacketConn, error) {
	pc, err := rawICMPv6(ctx, ifi)
	if err != nil {
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	for _, step := range []struct {
		what string
		err  error
	}{
		{"ICMPv6 filter", pc.SetICMPFilter(&f)},
		{"control messages", pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagInterface, true)},
		{"multicast hop limit", pc.SetMulticastHopLimit(255)},
		{"hop limit", pc.SetHopLimit(255)},
	} {
		if step.err != nil {
			pc.Close()
			return nil, fmt.Errorf("ra: %s on %s: %w", step.what, ifi.Name, step.err)
		}
	}
	return pc, nil
}
