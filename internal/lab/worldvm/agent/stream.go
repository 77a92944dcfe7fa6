package main

// A TCP bulk stream for throughput through the world's tunnels (bench/run's
// IKE section): sink-server counts what each connection sends and, at its
// end, answers with the count; stream sends for a while and reports the
// bytes the sink counted over the time until its answer came.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"
)

func cmdSinkServer(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	err = n.serveTCP("sink-server", args[1], func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Minute))
		got, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "%d\n", got)
	})
	if err != nil {
		return "", err
	}
	return "sink-server on tcp " + args[1], nil
}

// StreamReply is the stream command's answer.
type StreamReply struct {
	Bytes   int64
	Seconds float64
}

func cmdStream(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	d, err := time.ParseDuration(args[2])
	if err != nil || d <= 0 || d > time.Minute {
		return "", kinded("usage", fmt.Errorf("duration %q: want a Go duration up to 1m", args[2]))
	}
	c, err := n.dial(ctx, "tcp4", args[1])
	if err != nil {
		return "", err
	}
	defer c.Close()
	start := time.Now()
	c.SetDeadline(start.Add(d + 30*time.Second))
	buf := make([]byte, 32<<10)
	for time.Since(start) < d {
		if _, err := c.Write(buf); err != nil {
			return "", err
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	var got int64
	if _, err := fmt.Fscan(c, &got); err != nil {
		return "", fmt.Errorf("the sink's count: %w", err)
	}
	b, err := json.Marshal(StreamReply{Bytes: got, Seconds: time.Since(start).Seconds()})
	return string(b), err
}
