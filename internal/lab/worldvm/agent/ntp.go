package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"
)

// SNTP (RFC 4330) with the VM's clock as the reference.

const ntpEpochOffset = 2208988800 // seconds from 1900 to 1970

func ntpTime(t time.Time) uint64 {
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return secs<<32 | frac
}

func fromNTP(v uint64) time.Time {
	secs := int64(v>>32) - ntpEpochOffset
	nanos := int64((v & 0xffffffff) * 1e9 >> 32)
	return time.Unix(secs, nanos)
}

// ntpReply answers a client request received at recv; nil for what is
// not a client request.
func ntpReply(req []byte, recv, now time.Time) []byte {
	if len(req) < 48 || req[0]&7 != 3 {
		return nil
	}
	vn := req[0] >> 3 & 7
	resp := make([]byte, 48)
	resp[0] = vn<<3 | 4                        // LI 0, server
	resp[1] = 1                                // stratum 1: a primary reference, the VM's clock
	resp[2] = req[2]                           // poll
	resp[3] = 0xec                             // precision 2^-20
	binary.BigEndian.PutUint32(resp[8:], 0x10) // root dispersion, 1/4096 s
	copy(resp[12:16], "LOCL")
	binary.BigEndian.PutUint64(resp[16:], ntpTime(now))
	copy(resp[24:32], req[40:48]) // originate = the client's transmit
	binary.BigEndian.PutUint64(resp[32:], ntpTime(recv))
	binary.BigEndian.PutUint64(resp[40:], ntpTime(now))
	return resp
}

func cmdNTPServer(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	conn, err := n.listenUDP(":123")
	if err != nil {
		return "", err
	}
	if err := n.addService("ntp-server", conn); err != nil {
		return "", err
	}
	go func() {
		buf := make([]byte, 512)
		for {
			k, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			recv := time.Now()
			if r := ntpReply(buf[:k], recv, time.Now()); r != nil {
				n.event("ntp from %s", from)
				conn.WriteTo(r, from)
			}
		}
	}()
	return "ntp-server on udp 123, clock " + time.Now().UTC().Format(time.RFC3339), nil
}

func cmdNTP(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	server := args[1]
	if net.ParseIP(server) != nil {
		server = net.JoinHostPort(server, "123")
	}
	conn, err := n.dial(ctx, "udp4", server)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	req := make([]byte, 48)
	req[0] = 4<<3 | 3 // version 4, client
	t1 := time.Now()
	binary.BigEndian.PutUint64(req[40:], ntpTime(t1))
	if _, err := conn.Write(req); err != nil {
		return "", kinded(netKind(err, "failed"), err)
	}
	buf := make([]byte, 512)
	for {
		k, err := conn.Read(buf)
		if err != nil {
			return "", kinded(netKind(err, "failed"), fmt.Errorf("no answer from %s: %w", server, err))
		}
		t4 := time.Now()
		if k < 48 || buf[0]&7 != 4 || string(buf[24:32]) != string(req[40:48]) {
			continue
		}
		t2 := fromNTP(binary.BigEndian.Uint64(buf[32:]))
		t3 := fromNTP(binary.BigEndian.Uint64(buf[40:]))
		offset := (t2.Sub(t1) + t3.Sub(t4)) / 2
		return fmt.Sprintf("time %s stratum %d offset %v", t3.UTC().Format(time.RFC3339Nano), buf[1], offset.Round(time.Millisecond)), nil
	}
}
