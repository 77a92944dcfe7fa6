package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteDocSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.md")
	before := "# Results\n\nHand-written intro.\n\n" + docBegin + "\n\nold tables\n\n" + docEnd + "\n\nHand-written end.\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &results{
		Command: "bench/run -only esp",
		Started: "2026-12-03T21:00:00Z",
		Host:    hostInfoT{Hostname: "buildhost", CPU: "AMD EPYC", Cores: 2, GoVersion: "go1.26.8", LoadBefore: "0.5 0.6 0.7", LoadAfter: "1.0 1.1 1.2"},
		Trials:  3,
		Seconds: 49,
	}
	for i := 0; i < 2; i++ { // twice: a rewrite keeps the markers
		if err := writeDocSection(path, r.markdown()); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, "# Results\n\nHand-written intro.\n\n"+docBegin+"\n") || !strings.HasSuffix(got, docEnd+"\n\nHand-written end.\n") {
		t.Errorf("text outside the markers changed:\n%s", got)
	}
	if strings.Contains(got, "old tables") || strings.Count(got, docBegin) != 1 || strings.Count(got, docEnd) != 1 {
		t.Errorf("section not replaced exactly once:\n%s", got)
	}
	for _, want := range []string{"`bench/run -only esp`", "2026-12-03T21:00:00Z", "buildhost", "AMD EPYC", "2 cores", "load average 0.5 0.6 0.7 before"} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}

	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDocSection(path, r.markdown()); err == nil {
		t.Error("a document without markers was written")
	}
	if b, _ := os.ReadFile(path); string(b) != "no markers\n" {
		t.Errorf("a document without markers changed: %q", b)
	}
}
