package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// ServeTCP answers DNS over TCP (RFC 7766) on l until ctx is done: each
// message behind its 2-byte length, several queries per connection
// answered in order, a connection closed after TCPIdle without one, and
// at most MaxTCP connections open (one more is closed at once: a flood
// of connections costs no memory).
func (f *Forwarder) ServeTCP(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	sem := make(chan struct{}, f.cfg.MaxTCP)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors, say: wait rather than spin or stop.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			f.tcpRejected.Add(1)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f.serveConn(ctx, c)
		}()
	}
}

func (f *Forwarder) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var l [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(f.cfg.TCPIdle))
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		reply := f.reply(ctx, q, c.RemoteAddr(), true)
		if reply == nil {
			return // malformed: the stream cannot be trusted further
		}
		c.SetWriteDeadline(time.Now().Add(f.cfg.TCPIdle))
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(reply))), reply...)); err != nil {
			return
		}
	}
}
