package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The JSON outputs carry a version, write PCI ids as "vvvv:dddd" like
// profiles and plans do, and show empty lists as [] rather than leaving
// the field out.
func TestJSONShapes(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../boards/profiles/nslu2.yaml")
	must(t, err)
	// A user board with no aliases and no slots fields at all.
	y := strings.Replace(strings.Replace(string(b), "name: nslu2\n", "name: myslug\n", 1), "slots: []\n", "", 1)
	must(t, os.WriteFile(filepath.Join(dir, "myslug.yaml"), []byte(y), 0o644))

	type doc = map[string]any
	get := func(args ...string) doc {
		t.Helper()
		out, errs, code := ocfw(t, args...)
		var d doc
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
			t.Fatalf("%v: exit %d: %s\n%s", args, code, errs, out)
		}
		return d
	}
	for _, args := range [][]string{
		{"boards", "--json"},
		{"board", "show", "alix2d13", "--json"},
		{"board", "show", "vpn1411", "--json"},
		{"plan", "--board", "alix2d13", "--json"},
	} {
		if v := get(args...)["version"]; v != 1.0 {
			t.Errorf("%v: version %v, want 1", args, v)
		}
	}

	alix := get("board", "show", "alix2d13", "--json")
	pci := alix["engine_detail"].(doc)["match"].(doc)["pci"].([]any)
	if id := pci[0].(doc)["pci"]; id != "1022:2082" {
		t.Errorf("geode-aes PCI id %v (%T), want \"1022:2082\"", id, id)
	}
	slug := get("--profiles", dir, "board", "show", "myslug", "--json")
	board := slug["board"].(doc)
	for _, field := range []string{"aliases", "slots"} {
		if l, ok := board[field].([]any); !ok || len(l) != 0 {
			t.Errorf("board show myslug: %s = %#v, want []", field, board[field])
		}
	}
	if q, ok := slug["engine_detail"].(doc)["quirks"].([]any); !ok || len(q) == 0 {
		t.Errorf("ixp4xx quirks: %#v", slug["engine_detail"].(doc)["quirks"])
	}
	list := get("--profiles", dir, "boards", "--json")
	for _, l := range list["boards"].([]any) {
		if l.(doc)["name"] == "myslug" {
			if a, ok := l.(doc)["aliases"].([]any); !ok || len(a) != 0 {
				t.Errorf("boards --json: myslug aliases = %#v, want []", l.(doc)["aliases"])
			}
		}
	}
}
