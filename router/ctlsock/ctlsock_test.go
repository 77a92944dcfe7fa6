package ctlsock

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type question struct{ N int }
type reply struct{ Double int }

// serve runs Serve on a fresh socket for the test's life.
func serve(t *testing.T, answer func(dec *json.Decoder) any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "x.sock") // the folder is made
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, path, 5*time.Second, answer) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		if time.Now().After(end) {
			t.Fatal("no socket")
		}
	}
}

// A request and its answer, a request-less exchange (the status), a bad
// request, and no router: each as the client sees it.
func TestExchange(t *testing.T) {
	path := serve(t, func(dec *json.Decoder) any {
		var q question
		if err := dec.Decode(&q); err != nil {
			return map[string]string{"error": "bad request: " + err.Error()}
		}
		return reply{Double: 2 * q.N}
	})
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, %v; want 0600 (root only)", fi.Mode(), err)
	}
	var r reply
	if err := Call(path, 5*time.Second, question{N: 21}, &r); err != nil || r.Double != 42 {
		t.Errorf("Call: %+v, %v", r, err)
	}
	var bad map[string]string
	if err := Call(path, 5*time.Second, "not a question", &bad); err != nil || !strings.HasPrefix(bad["error"], "bad request: ") {
		t.Errorf("a bad request: %v, %v", bad, err)
	}

	status := serve(t, func(*json.Decoder) any { return reply{Double: 7} })
	if err := Call(status, 5*time.Second, nil, &r); err != nil || r.Double != 7 {
		t.Errorf("request-less Call: %+v, %v", r, err)
	}

	none := filepath.Join(t.TempDir(), "none.sock")
	if err := Call(none, 5*time.Second, nil, &r); err == nil || !strings.Contains(err.Error(), "the router is not running (no "+none+")") {
		t.Errorf("no router: %v", err)
	}
}
