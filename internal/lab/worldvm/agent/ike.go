package main

// ocfw's own IKEv2 endpoint (router/ike) run in a namespace of the world,
// against a real peer there (strongSwan, package strongswan): the same
// code the board runs, on UDP 500 and 4500, with a sink that records
// the CHILD SAs and, with "install", puts them into the namespace's
// kernel through router/ipsec, so that traffic can cross the tunnel.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/ocfw/ocfw/router/childsa"
	"github.com/ocfw/ocfw/router/ike"
	"github.com/ocfw/ocfw/router/ipsec"
)

// IKEConfig is the JSON of the ike command: one peer, proposals in
// strongSwan's notation (aes128-sha256-modp2048; esp: aes128-sha256,
// a group for PFS). IDs that parse as addresses are ID_IPV4_ADDR or
// ID_IPV6_ADDR, e-mail
// addresses ID_RFC822_ADDR, others FQDN; empty means the address.
type IKEConfig struct {
	Name     string `json:"name"`
	Local    string `json:"local"`
	Remote   string `json:"remote"`
	LocalID  string `json:"local_id"`
	RemoteID string `json:"remote_id"`
	PSK      string `json:"psk"`
	IKE      string `json:"ike"`
	ESP      string `json:"esp"`
	LocalTS  string `json:"local_ts"`
	RemoteTS string `json:"remote_ts"`
	Initiate bool   `json:"initiate"`
	// Install puts the CHILD SAs into the kernel (router/ipsec).
	Install bool `json:"install"`
	// DPD is the liveness check interval (a Go duration; "" is none).
	DPD string `json:"dpd"`
	// Retransmit and Retries: the first retransmission's wait (a Go
	// duration) and the sends in all; Retry the wait before an initiator
	// tries again. "" and 0: the endpoint's defaults.
	Retransmit string `json:"retransmit"`
	Retries    int    `json:"retries"`
	Retry      string `json:"retry"`
}

// ikeRun is one endpoint the agent runs.
type ikeRun struct {
	ep *ike.Endpoint
	mu sync.Mutex
	// installed and deleted are the sink's calls (ChildSA.String: no keys).
	installed, deleted []string
	log                tailBuffer
	// xfrm and sink, when installing: the router's CHILD SA sink
	// (router/childsa), so that a rekey here orders its installs and
	// deletes as the router's does.
	xfrm *ipsec.Handle
	sink *childsa.Sink
}

func (r *ikeRun) Install(c ike.ChildSA) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.installed = append(r.installed, c.String())
	if r.sink == nil {
		return nil
	}
	return r.sink.Install(c)
}

func (r *ikeRun) Delete(c ike.ChildSA) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, c.String())
	if r.sink == nil {
		return nil
	}
	return r.sink.Delete(c)
}

var (
	ikeMu   sync.Mutex
	ikeRuns = map[string]*ikeRun{}
)

// transforms reads strongSwan's proposal notation into one proposal.
func transforms(s string, proto ike.ProtocolID) (ike.Proposal, error) {
	p := ike.Proposal{Protocol: proto}
	for _, w := range strings.Split(s, "-") {
		var t ike.Transform
		switch w {
		case "aes128", "aes192", "aes256":
			bits := map[string]uint16{"aes128": 128, "aes192": 192, "aes256": 256}[w]
			t = ike.T(ike.TransformENCR, ike.ENCR_AES_CBC, bits)
		case "3des":
			t = ike.T(ike.TransformENCR, ike.ENCR_3DES, 0)
		case "sha1", "sha256":
			integ := map[string]uint16{"sha1": ike.AUTH_HMAC_SHA1_96, "sha256": ike.AUTH_HMAC_SHA2_256_128}[w]
			p.Transforms = append(p.Transforms, ike.T(ike.TransformINTEG, integ, 0))
			if proto == ike.ProtoIKE {
				prf := map[string]uint16{"sha1": ike.PRF_HMAC_SHA1, "sha256": ike.PRF_HMAC_SHA2_256}[w]
				p.Transforms = append(p.Transforms, ike.T(ike.TransformPRF, prf, 0))
			}
			continue
		case "modp2048", "ecp256", "curve25519":
			g := map[string]ike.DHGroup{"modp2048": ike.MODP2048, "ecp256": ike.ECP256, "curve25519": ike.Curve25519}[w]
			t = ike.T(ike.TransformDH, uint16(g), 0)
		default:
			return p, fmt.Errorf("proposal %q: unknown %q (have aes128 aes192 aes256 3des sha1 sha256 modp2048 ecp256 curve25519)", s, w)
		}
		p.Transforms = append(p.Transforms, t)
	}
	if proto == ike.ProtoESP {
		p.Transforms = append(p.Transforms, ike.T(ike.TransformESN, ike.ESN_NO, 0))
	}
	return p, nil
}

func identity(s string) ike.Identity {
	if s == "" {
		return ike.Identity{}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return ike.AddrIdentity(a)
	}
	// An e-mail address is ID_RFC822_ADDR (Libreswan's and strongSwan's
	// user@host); a leading @ only marks a name.
	if i := strings.IndexByte(s, '@'); i > 0 {
		return ike.Identity{IDType: ike.ID_RFC822_ADDR, Data: []byte(s)}
	}
	return ike.Identity{IDType: ike.ID_FQDN, Data: []byte(strings.TrimPrefix(s, "@"))}
}

func (c IKEConfig) peer() (ike.Peer, error) {
	local, err := netip.ParseAddr(c.Local)
	if err != nil {
		return ike.Peer{}, fmt.Errorf("local: %w", err)
	}
	remote, err := netip.ParseAddr(c.Remote)
	if err != nil {
		return ike.Peer{}, fmt.Errorf("remote: %w", err)
	}
	lts, err := netip.ParsePrefix(c.LocalTS)
	if err != nil {
		return ike.Peer{}, fmt.Errorf("local_ts: %w", err)
	}
	rts, err := netip.ParsePrefix(c.RemoteTS)
	if err != nil {
		return ike.Peer{}, fmt.Errorf("remote_ts: %w", err)
	}
	ip, err := transforms(c.IKE, ike.ProtoIKE)
	if err != nil {
		return ike.Peer{}, err
	}
	ep, err := transforms(c.ESP, ike.ProtoESP)
	if err != nil {
		return ike.Peer{}, err
	}
	var dpd time.Duration
	if c.DPD != "" {
		if dpd, err = time.ParseDuration(c.DPD); err != nil {
			return ike.Peer{}, fmt.Errorf("dpd: %w", err)
		}
	}
	return ike.Peer{Name: c.Name, DPD: dpd, Local: netip.AddrPortFrom(local, 500), Remote: netip.AddrPortFrom(remote, 500),
		LocalID: identity(c.LocalID), RemoteID: identity(c.RemoteID), PSK: []byte(c.PSK),
		IKE: []ike.Proposal{ip}, Child: []ike.Proposal{ep},
		LocalTS: []netip.Prefix{lts}, RemoteTS: []netip.Prefix{rts}, Initiate: c.Initiate}, nil
}

// cmdIKE starts an endpoint named NAME in namespace NS on UDP 500 and
// 4500 with the JSON configuration.
func cmdIKE(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	name := args[1]
	var c IKEConfig
	if err := json.Unmarshal([]byte(args[2]), &c); err != nil {
		return "", kinded("usage", fmt.Errorf("ike configuration: %w", err))
	}
	p, err := c.peer()
	if err != nil {
		return "", kinded("usage", fmt.Errorf("ike configuration: %w", err))
	}
	ikeMu.Lock()
	defer ikeMu.Unlock()
	if _, ok := ikeRuns[name]; ok {
		return "", fmt.Errorf("ike %s already runs", name)
	}
	// The local address's family: an IPv6 WAN gets udp6 sockets, as
	// the router's listenIKE opens them.
	network := "udp4"
	if p.Local.Addr().Is6() {
		network = "udp6"
	}
	c500, err := n.listenUDPNet(network, ":500")
	if err != nil {
		return "", err
	}
	c4500, err := n.listenUDPNet(network, ":4500")
	if err != nil {
		c500.Close()
		return "", err
	}
	if err := ike.ESPInUDP(c4500.(*net.UDPConn)); err != nil {
		c500.Close()
		c4500.Close()
		return "", fmt.Errorf("UDP_ENCAP on port 4500: %w", err)
	}
	r := &ikeRun{}
	if c.Install {
		if r.xfrm, err = ipsec.OpenInNetNS(n.fd); err != nil {
			c500.Close()
			c4500.Close()
			return "", err
		}
		r.sink = childsa.New(r.xfrm)
	}
	cfg := ike.Config{Peers: []ike.Peer{p}, Conn: ike.UDPConn(c500.(*net.UDPConn)),
		NATT: ike.UDPConn(c4500.(*net.UDPConn)), Sink: r, Retries: c.Retries,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(&r.log, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
		}}
	for _, d := range []struct {
		s    string
		into *time.Duration
	}{{c.Retransmit, &cfg.RetransmitBase}, {c.Retry, &cfg.RetryInterval}} {
		if d.s == "" {
			continue
		}
		if *d.into, err = time.ParseDuration(d.s); err != nil {
			c500.Close()
			c4500.Close()
			return "", kinded("usage", fmt.Errorf("ike configuration: %w", err))
		}
	}
	ep, err := ike.New(cfg)
	if err != nil {
		c500.Close()
		c4500.Close()
		return "", err
	}
	r.ep = ep
	ikeRuns[name] = r
	go func() {
		if err := ep.Run(); err != nil {
			fmt.Fprintf(&r.log, "run: %v\n", err)
		}
	}()
	return fmt.Sprintf("ike %s in %s on udp 500 and 4500", name, n.name), nil
}

// IKEStatus is what ike-status prints, as JSON.
type IKEStatus struct {
	Peers              []ike.PeerStatus
	Installed, Deleted []string
	Log                string
}

func cmdIKEStatus(_ context.Context, _ *agent, args []string) (string, error) {
	ikeMu.Lock()
	r, ok := ikeRuns[args[0]]
	ikeMu.Unlock()
	if !ok {
		return "", kinded("usage", fmt.Errorf("no ike endpoint %q", args[0]))
	}
	st := IKEStatus{Peers: r.ep.Status(), Log: r.log.String()}
	r.mu.Lock()
	st.Installed, st.Deleted = append([]string(nil), r.installed...), append([]string(nil), r.deleted...)
	r.mu.Unlock()
	b, err := json.Marshal(st)
	return string(b), err
}

// cmdIKEStop closes an endpoint (its IKE SAs are left to the peer, as
// after a power cut) and forgets it: its name and ports are free again.
func cmdIKEStop(_ context.Context, _ *agent, args []string) (string, error) {
	ikeMu.Lock()
	defer ikeMu.Unlock()
	r, ok := ikeRuns[args[0]]
	if !ok {
		return "", kinded("usage", fmt.Errorf("no ike endpoint %q", args[0]))
	}
	delete(ikeRuns, args[0])
	return "stopped " + args[0], r.ep.Close()
}

// cmdIKERekey starts a rekey of the endpoint's CHILD SAs ("child") or
// IKE SA ("ike") now, as the lifetimes would.
func cmdIKERekey(_ context.Context, _ *agent, args []string) (string, error) {
	ikeMu.Lock()
	r, ok := ikeRuns[args[0]]
	ikeMu.Unlock()
	if !ok {
		return "", kinded("usage", fmt.Errorf("no ike endpoint %q", args[0]))
	}
	var err error
	for _, ps := range r.ep.Status() {
		switch args[1] {
		case "child":
			err = r.ep.RekeyChild(ps.Name)
		case "ike":
			err = r.ep.RekeyIKE(ps.Name)
		default:
			return "", kinded("usage", fmt.Errorf("rekey %q: want child or ike", args[1]))
		}
		if err != nil {
			return "", err
		}
	}
	return "rekeying " + args[1], nil
}
