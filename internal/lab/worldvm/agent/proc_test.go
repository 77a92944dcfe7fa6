package main

import (
	"context"
	"strings"
	"testing"
)

func TestProgramArgs(t *testing.T) {
	env, argv, err := programArgs([]string{"A=1", "LD_LIBRARY_PATH=/lib", "/bin/sh", "X=2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(env, " ") != "PATH=/usr/sbin:/usr/bin:/sbin:/bin A=1 LD_LIBRARY_PATH=/lib" || strings.Join(argv, " ") != "/bin/sh X=2" {
		t.Errorf("env %q argv %q", env, argv)
	}
	for _, bad := range [][]string{{"A=1"}, {"sh"}, {"/no/such/program"}} {
		if _, _, err := programArgs(bad); err == nil || !strings.HasPrefix(err.Error(), "usage:") {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	var b tailBuffer
	b.Write([]byte("head"))
	b.Write([]byte(strings.Repeat("x", maxOutput)))
	b.Write([]byte("end"))
	s := b.String()
	if len(s) != maxOutput || !strings.HasSuffix(s, "end") || strings.Contains(s, "head") {
		t.Errorf("kept %d bytes, suffix %q", len(s), s[len(s)-3:])
	}
}

func TestWriteRefusesSystemPaths(t *testing.T) {
	for _, p := range []string{"/proc/sys/x", "/init", "relative", "/a/../b"} {
		if _, err := cmdWrite(context.Background(), nil, []string{p, "x"}); err == nil || !strings.HasPrefix(err.Error(), "usage:") {
			t.Errorf("%s: %v, want a usage error", p, err)
		}
	}
}
