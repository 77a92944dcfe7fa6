package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "new" {
		t.Fatalf("read %q, %v; want new", got, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	assertOnly(t, dir, "a.json")
}

func TestSetCommitAndCleanup(t *testing.T) {
	dir := t.TempDir()
	var s Set
	f, err := s.Create(filepath.Join(dir, "x.img"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("image")
	f.Close() // a closed file is still synced by Commit
	if err := s.WriteFile(filepath.Join(dir, "x.img.manifest.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// Before Commit nothing has its final name.
	assertOnly(t, dir, TempPattern("x.img"), TempPattern("x.img.manifest.json"))
	if err := s.Commit(0o644); err != nil {
		t.Fatal(err)
	}
	s.Cleanup()
	assertOnly(t, dir, "x.img", "x.img.manifest.json")

	// An abandoned set leaves nothing.
	var s2 Set
	if err := s2.WriteFile(filepath.Join(dir, "y.img"), []byte("half")); err != nil {
		t.Fatal(err)
	}
	s2.Cleanup()
	assertOnly(t, dir, "x.img", "x.img.manifest.json")
}

func TestWriteFileMissingDir(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such"), []byte("x"), 0o644); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

// assertOnly checks dir holds exactly the named files (or names matching
// the patterns).
func assertOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(want) {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Fatalf("dir holds %v, want %v", names, want)
	}
	for _, w := range want {
		m, _ := filepath.Glob(filepath.Join(dir, w))
		if len(m) != 1 {
			t.Errorf("%s: %d matches, want 1", w, len(m))
		}
	}
}
