package config

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

// Socket is where the router takes `ocf config apply|confirm|status`.
const Socket = "/run/ocfw/config.sock"

// Request is one call on the socket (one per connection).
type Request struct {
	Op    string        `json:"op"` // apply, confirm, status
	Apply *ApplyRequest `json:"apply,omitempty"`
	Conn  string        `json:"conn,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	Error   string      `json:"error,omitempty"`
	Message string      `json:"message,omitempty"`
	Apply   *ApplyReply `json:"apply,omitempty"`
	Record  *Record     `json:"record,omitempty"`
}

// maxRequest bounds a request: a site config and its key files.
const maxRequest = 1 << 20

// Serve answers requests on a unix socket at path until ctx is done. Only
// root reaches it (the directory is the router's).
func (m *Manager) Serve(ctx context.Context, path string) error {
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	os.Chmod(path, 0o600)
	context.AfterFunc(ctx, func() { ln.Close() })
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go m.serveConn(c)
	}
}

func (m *Manager) serveConn(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var req Request
	if err := json.NewDecoder(io.LimitReader(c, maxRequest)).Decode(&req); err != nil {
		json.NewEncoder(c).Encode(Reply{Error: "bad request: " + err.Error()})
		return
	}
	json.NewEncoder(c).Encode(m.Handle(req))
}

// Handle runs one request.
func (m *Manager) Handle(req Request) Reply {
	switch req.Op {
	case "apply":
		if req.Apply == nil {
			return Reply{Error: "apply: no config"}
		}
		r, err := m.Apply(*req.Apply)
		if err != nil {
			return Reply{Error: err.Error()}
		}
		return Reply{Apply: &r, Message: r.Message}
	case "confirm":
		msg, err := m.Confirm(req.Conn)
		if err != nil {
			return Reply{Error: err.Error()}
		}
		return Reply{Message: msg}
	case "status":
		r := m.Status()
		return Reply{Record: &r, Message: r.Summary()}
	}
	return Reply{Error: fmt.Sprintf("unknown operation %q (apply, confirm, status)", req.Op)}
}

// Call sends a request to the router's socket at path.
func Call(path string, req Request) (*Reply, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("the router is not running (no %s): the firmware has no site config, or it failed at boot (see the console)", path)
		}
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	var r Reply
	if err := json.NewDecoder(io.LimitReader(c, maxRequest)).Decode(&r); err != nil {
		return nil, fmt.Errorf("reading the router's answer: %w", err)
	}
	if r.Error != "" {
		return &r, errors.New(r.Error)
	}
	return &r, nil
}

// Summary is the record in a line.
func (r Record) Summary() string {
	switch r.State {
	case "":
		return "no config was ever pushed: the box runs the card's site.json or the built-in one"
	case StateProvisional:
		return fmt.Sprintf("pushed config %d is provisional: rolled back at %s unless confirmed (ocf config confirm, over a new SSH connection)",
			r.Candidate.N, r.Deadline.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s; the box boots %s", r.Note, genName(r.Confirmed))
}
