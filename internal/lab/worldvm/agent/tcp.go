package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

func cmdEchoServer(_ context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	port, _ := strconv.Atoi(args[1]) // serveTCP refuses a bad one
	if err := n.serveTCP("echo-server", args[1], func(c net.Conn) { echo(n, port, c) }); err != nil {
		return "", err
	}
	return "echo-server on tcp " + args[1], nil
}

// serveTCP runs a TCP service in n on port, kept among the namespace's
// services as name:port (removing it closes the listener); each
// connection goes to handle in a goroutine of its own.
func (n *netNS) serveTCP(name, port string, handle func(net.Conn)) error {
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return kinded("usage", fmt.Errorf("port %q", port))
	}
	l, err := n.listenTCP(":" + port)
	if err != nil {
		return err
	}
	if err := n.addService(name+":"+port, l); err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return nil
}

// echo tells the peer the address it came from, then echoes one line.
func echo(n *netNS, port int, c net.Conn) {
	defer c.Close()
	from := c.RemoteAddr().String()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "from %s\n", from)
	line, err := bufio.NewReader(c).ReadString('\n')
	n.event("echo %d from %s line %q", port, from, strings.TrimSuffix(line, "\n"))
	if err == nil {
		c.Write([]byte(line))
	}
}

// tcpIdle ends a tcp command's reading once the peer has said
// something and then nothing for this long (servers that never close).
const tcpIdle = 3 * time.Second

func cmdTCP(ctx context.Context, a *agent, args []string) (string, error) {
	n, err := a.ns(args[0])
	if err != nil {
		return "", err
	}
	network := "tcp4"
	if strings.HasPrefix(args[1], "[") {
		network = "tcp6"
	}
	c, err := n.dial(ctx, network, args[1])
	if err != nil {
		return "", err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	if _, err := c.Write([]byte(args[2] + "\n")); err != nil {
		return "", kinded(netKind(err, "failed"), err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		if len(got) > 0 {
			idle := time.Now().Add(tcpIdle)
			if idle.Before(dl) {
				c.SetReadDeadline(idle)
			}
		}
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if len(got) > 64<<10 {
			return "", fmt.Errorf("more than 64 KiB from %s", args[1])
		}
		if err != nil {
			if errors.Is(err, io.EOF) || len(got) > 0 {
				// The peer closed, or went quiet (or reset) after answering.
				return strings.TrimSuffix(string(got), "\n"), nil
			}
			return "", kinded(netKind(err, "failed"), fmt.Errorf("connected to %s, no reply: %w", args[1], err))
		}
	}
}
