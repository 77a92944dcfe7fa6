// Package ctlsock holds the exchange on the router's control sockets
// (`ocf net` and its views, `ocf config`): one JSON request and one JSON
// answer per connection, on a unix socket only root reaches. The server
// and the client are the same binary on the board, so the two sides
// change together.
//
// It is board-side code: it imports no ocfw package.
package ctlsock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"
)

// MaxMessage bounds a request and an answer: a site config with its key
// files, or the router's status.
const MaxMessage = 1 << 20

// Serve answers connections on a unix socket at path until ctx is done.
// answer reads the connection's request from dec, when the exchange has
// one (at most MaxMessage bytes), and returns what is sent back as JSON;
// each connection has timeout for the whole exchange and its own
// goroutine, so a slow client holds up no other.
func Serve(ctx context.Context, path string, timeout time.Duration, answer func(dec *json.Decoder) any) error {
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.Remove(path) // a previous run's socket
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return err
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(timeout))
			json.NewEncoder(c).Encode(answer(json.NewDecoder(io.LimitReader(c, MaxMessage))))
		}()
	}
}

// Call sends req on the socket at path (nothing when req is nil) and
// decodes the answer into answer, all within timeout. With no socket
// there, the error says the router is not running and where to look.
func Call(path string, timeout time.Duration, req, answer any) error {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the router is not running (no %s): the firmware has no site config, or it failed at boot (see the console)", path)
		}
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if req != nil {
		if err := json.NewEncoder(c).Encode(req); err != nil {
			return fmt.Errorf("asking the router on %s: %w", path, err)
		}
	}
	if err := json.NewDecoder(io.LimitReader(c, MaxMessage)).Decode(answer); err != nil {
		return fmt.Errorf("reading the router's answer on %s: %w", path, err)
	}
	return nil
}
