package sshd

import (
	"bytes"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// idleConn gives a connection its time limits. Until the client's
// identification line (its first line) has come, reads and writes share
// the short ident deadline; then, until loggedIn, the login grace. After it, a read may
// wait IdleTimeout, renewed while the server has been writing: a command
// that prints for an hour to a client that types nothing is not idle.
// x/crypto/ssh reads in one goroutine, so a read that times out ends the
// connection.
type idleConn struct {
	net.Conn
	idle      time.Duration
	grace     atomic.Int64 // deadline in Unix nanoseconds; 0 once logged in
	lastWrite atomic.Int64
	// onIdent runs once, in Read, when the first newline arrives; nil
	// after.
	onIdent func()
	// heard, if not nil, is set to the time of each read that brought
	// bytes: the gate closes the connection heard from longest ago
	// first.
	heard *atomic.Int64
}

func newIdleConn(c net.Conn, idle time.Duration, ident, grace time.Time, onIdent func(), heard *atomic.Int64) *idleConn {
	ic := &idleConn{Conn: c, idle: idle, onIdent: onIdent, heard: heard}
	ic.grace.Store(grace.UnixNano())
	ic.lastWrite.Store(time.Now().UnixNano())
	if grace.Before(ident) {
		ident = grace
	}
	c.SetDeadline(ident)
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
		if n > 0 && c.heard != nil {
			c.heard.Store(time.Now().UnixNano())
		}
		if c.onIdent != nil && bytes.IndexByte(p[:n], '\n') >= 0 {
			// x/crypto/ssh is the only reader: no race on onIdent.
			if g := c.grace.Load(); g != 0 {
				c.Conn.SetDeadline(time.Unix(0, g))
			}
			c.onIdent()
			c.onIdent = nil
		}
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
