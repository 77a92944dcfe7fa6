// Package push sends a site config to a running router over SSH (ocfw
// push): it stages a bundle with `ocf config stage`, applies it with `ocf
// config apply`, and confirms it over a new connection, which proves the
// new config still lets the admin in; without that confirm the box rolls
// back by itself (router/config).
package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/sshclient"
	"github.com/ocfw/ocfw/router/config"
)

// Options say where and how to push.
type Options struct {
	// The box and the login: the client and host key check ocfw
	// upgrade uses too.
	sshclient.Options
	// Within is the confirm timeout the box gets.
	Within time.Duration
	// NoConfirm leaves the config provisional.
	NoConfirm bool
	// Out gets progress lines.
	Out io.Writer
}

// Bundle is what is pushed.
type Bundle struct {
	Site  []byte            // site.json
	Files map[string][]byte // key files by name
}

// ErrNoReconnect says the confirm could not be sent: the box rolls back.
var ErrNoReconnect = errors.New("could not reconnect over SSH to confirm")

// Push stages, applies and (unless NoConfirm) confirms b on the box.
func Push(ctx context.Context, o Options, b Bundle) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Within == 0 {
		o.Within = config.DefaultWithin
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 10 * time.Second
	}
	cl, err := sshclient.New(o.Options)
	if err != nil {
		return err
	}
	addr, user := cl.Addr, cl.User
	var bundle bytes.Buffer
	if err := config.WriteBundle(&bundle, b.Site, b.Files); err != nil {
		return err
	}
	c, err := cl.Dial(ctx, 0)
	if err != nil {
		return err
	}
	out, err := sshclient.Output(c, "ocf config stage", bundle.Bytes())
	if err != nil {
		c.Close()
		return fmt.Errorf("staging on %s: %w", addr, err)
	}
	fmt.Fprint(o.Out, out)
	start := time.Now()
	out, err = sshclient.Output(c, fmt.Sprintf("ocf config apply --confirm-within %s", o.Within), nil)
	c.Close()
	if err != nil {
		return fmt.Errorf("applying on %s: %w", addr, err)
	}
	fmt.Fprint(o.Out, out)
	if strings.Contains(out, "nothing changed") {
		return nil
	}
	gen, ok := config.AppliedGen(out)
	if !ok {
		return fmt.Errorf("applying on %s: the box's answer names no pushed config number, so push cannot confirm it (ocf config status on the box says what waits): %q", addr, out)
	}
	deadline := start.Add(o.Within)
	if o.NoConfirm {
		fmt.Fprintf(o.Out, "left provisional, as asked: confirm with `%s` before %s, or the box rolls back by itself\n",
			confirmCommand(addr, user, gen), deadline.Format(time.TimeOnly))
		return nil
	}
	// A new connection: the one that applied proves nothing about the
	// new config. Tried until shortly before the box gives up.
	var last error
	for try := 0; ; try++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(confirmPause(try)):
		}
		if time.Until(deadline) < 2*time.Second {
			break
		}
		c, err := cl.Dial(ctx, min(o.DialTimeout, time.Until(deadline)))
		if err != nil {
			last = err
			continue
		}
		out, err := sshclient.Output(c, fmt.Sprintf("ocf config confirm %d", gen), nil)
		c.Close()
		if err != nil {
			return fmt.Errorf("confirming pushed config %d on %s: %w", gen, addr, err)
		}
		fmt.Fprint(o.Out, out)
		return nil
	}
	return fmt.Errorf("%w (%v): the box rolls back to its previous config by itself at about %s", ErrNoReconnect, last, deadline.Format(time.TimeOnly))
}

// confirmCommand is the OpenSSH command that confirms generation gen on
// the box at addr: ssh takes the port as -p, not as host:port.
func confirmCommand(addr, user string, gen int) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "22"
	}
	p := ""
	if port != "22" {
		p = "-p " + port + " "
	}
	return fmt.Sprintf("ssh %s%s@%s ocf config confirm %d", p, user, host, gen)
}

// confirmPause waits for the box to have applied (it waits
// config.ApplyDelay, then restarts what changed) before the first try.
func confirmPause(try int) time.Duration {
	if try == 0 {
		return 2 * config.ApplyDelay
	}
	return 2 * time.Second
}
