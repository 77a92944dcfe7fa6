package worldvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// placeTreeEnv names the tree a helper process places (see
// TestPlaceTreeHelper).
const placeTreeEnv = "OCFW_TEST_PLACE_TREE"

// TestPlaceTreeTwoProcesses is the race of a fresh CI machine (issue
// 28): two test processes unpack the same tree into an empty cache at
// once. Each is this test binary run again as TestPlaceTreeHelper;
// both must succeed and leave one complete tree and no temporary
// directory. Without the lock (and the "already there" check) the
// second rename failed with "file exists".
func TestPlaceTreeTwoProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "peer", "i386", "root-test")
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		c := exec.Command(os.Args[0], "-test.run=^TestPlaceTreeHelper$", "-test.v")
		c.Env = append(os.Environ(), placeTreeEnv+"="+dir)
		out := &strings.Builder{}
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, out)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i+1, err, outs[i])
		} else if !strings.Contains(outs[i].String(), "tree placed") {
			t.Errorf("process %d did not run the helper:\n%s", i+1, outs[i])
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "usr/lib/ipsec/charon")); err != nil || string(b) != "complete" {
		t.Errorf("the tree's file: %q, %v; want \"complete\"", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".unpack-*"))
	if len(left) > 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

// TestPlaceTreeHelper is one of TestPlaceTreeTwoProcesses's processes:
// it places the tree named by placeTreeEnv, writing it slowly (until
// the other process's temporary directory shows, or a second) so that
// two unpacks overlap unless the lock keeps them apart.
func TestPlaceTreeHelper(t *testing.T) {
	dir := os.Getenv(placeTreeEnv)
	if dir == "" {
		t.Skip("a helper process of TestPlaceTreeTwoProcesses")
	}
	complete := func(d string) bool {
		b, err := os.ReadFile(filepath.Join(d, "usr/lib/ipsec/charon"))
		return err == nil && string(b) == "complete"
	}
	err := placeTree(dir, complete, func(tmp string) error {
		f := filepath.Join(tmp, "usr/lib/ipsec/charon")
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".unpack-*")); len(m) > 1 {
				break
			}
		}
		return os.WriteFile(f, []byte("complete"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !complete(dir) {
		t.Fatal("placeTree returned but the tree is incomplete")
	}
	t.Log("tree placed")
}
