package libreswan

import (
	"os"
	"strings"
	"testing"
)

// TestLibreswanDocMatchesTestdata: the ipsec.conf docs/tunnels.md shows
// under "A Libreswan peer" is byte for byte the file the tests load into
// pluto, so the documented configuration is the tested one (issue 28).
func TestLibreswanDocMatchesTestdata(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/tunnels.md")
	if err != nil {
		t.Fatal(err)
	}
	want := string(readTestdata(t, "east.ipsec.conf"))
	_, sec, ok := strings.Cut(string(doc), "\n### A Libreswan peer\n")
	if !ok {
		t.Fatal("docs/tunnels.md: no section \"### A Libreswan peer\"")
	}
	sec, _, _ = strings.Cut(sec, "\n### ")
	_, block, ok := strings.Cut(sec, "\n```\n")
	if !ok {
		t.Fatal("docs/tunnels.md, \"A Libreswan peer\": no ``` block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("docs/tunnels.md, \"A Libreswan peer\": the ``` block does not end")
	}
	if block != want {
		t.Errorf("docs/tunnels.md's ipsec.conf differs from testdata/east.ipsec.conf:\n--- doc\n%s\n--- testdata\n%s", block, want)
	}
}
