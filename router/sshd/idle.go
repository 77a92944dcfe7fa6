package sshd

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// idleConn gives a connection its two time limits. Until loggedIn, reads
// and writes share one deadline (the login grace). After it, a read may
// wait IdleTimeout, renewed while the server has been writing: a command
// that prints for an hour to a client that types nothing is not idle.
// x/crypto/ssh reads in one goroutine, so a read that times out ends the
// connection.
type idleConn struct {
	net.Conn
	idle      time.Duration
	grace     atomic.Int64 // deadline in Unix nanoseconds; 0 once logged in
	lastWrite atomic.Int64
}

func newIdleConn(c net.Conn, idle time.Duration, grace time.Time) *idleConn {
	ic := &idleConn{Conn: c, idle: idle}
	ic.grace.Store(grace.UnixNano())
	ic.lastWrite.Store(time.Now().UnixNano())
	c.SetDeadline(grace)
	return ic
}

// loggedIn ends the grace. x/crypto/ssh's reader is already waiting
// under the grace deadline: moving the deadline to the idle one wakes it
// then, and Read carries on under the idle rule.
func (c *idleConn) loggedIn() {
	c.grace.Store(0)
	c.Conn.SetWriteDeadline(time.Time{})
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
}

func (c *idleConn) Read(p []byte) (int, error) {
	for {
		if c.grace.Load() == 0 {
			c.Conn.SetReadDeadline(time.Now().Add(c.idle))
		}
		n, err := c.Conn.Read(p)
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() && c.grace.Load() == 0 &&
			time.Since(time.Unix(0, c.lastWrite.Load())) < c.idle {
			continue
		}
		return n, err
	}
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.lastWrite.Store(time.Now().UnixNano())
	return n, err
}
