package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ocfw/ocfw/router/ctlsock"
)

// Socket is where the router takes `ocf config apply|confirm|status`.
const Socket = "/run/ocfw/config.sock"

// Request is one call on the socket (one per connection).
type Request struct {
	Op    string        `json:"op"` // apply, confirm, status
	Apply *ApplyRequest `json:"apply,omitempty"`
	Conn  string        `json:"conn,omitempty"`
	// Gen is the generation a confirm is for (0: whichever waits).
	Gen int `json:"gen,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	Error   string      `json:"error,omitempty"`
	Message string      `json:"message,omitempty"`
	Apply   *ApplyReply `json:"apply,omitempty"`
	Record  *Record     `json:"record,omitempty"`
}

// Serve answers requests on a unix socket at path until ctx is done. Only
// root reaches it. An apply restarts services: it has 30 s.
func (m *Manager) Serve(ctx context.Context, path string) error {
	return ctlsock.Serve(ctx, path, 30*time.Second, func(dec *json.Decoder) any {
		var req Request
		if err := dec.Decode(&req); err != nil {
			return Reply{Error: "bad request: " + err.Error()}
		}
		return m.Handle(req)
	})
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
		msg, err := m.Confirm(req.Conn, req.Gen)
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
	var r Reply
	if err := ctlsock.Call(path, 30*time.Second, req, &r); err != nil {
		return nil, err
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
		return fmt.Sprintf("pushed config %d is provisional: rolled back at %s unless confirmed (ocf config confirm %d, over a new SSH connection)",
			r.Candidate.N, r.Deadline.Format(time.RFC3339), r.Candidate.N)
	}
	return fmt.Sprintf("%s; the box boots %s", r.Note, genName(r.Confirmed))
}
