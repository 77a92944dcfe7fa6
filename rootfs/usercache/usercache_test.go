package usercache

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testModule writes a small module with two commands, one importing a
// package of the module, and a site config beside them that nothing
// compiles.
func testModule(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command on $PATH: %v", err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":              "module example.com/fw\n\ngo 1.21\n",
		"cmd/a/main.go":       "package main\n\nimport \"example.com/fw/lib\"\n\nfunc main() { lib.Hello() }\n",
		"cmd/b/main.go":       "package main\n\nfunc main() {}\n",
		"lib/lib.go":          "package lib\n\nimport \"fmt\"\n\nfunc Hello() { fmt.Println(\"hello\") }\n",
		"lib/lib_arm.go":      "package lib\n\nconst arm = true\n",
		"lib/lib_test.go":     "package lib\n",
		"sites/router.yaml":   "kind: site\nboard: alix2d13\n",
		"lib/notes/readme.md": "not compiled\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testInputs(dir string) Inputs {
	return Inputs{SourceDir: dir, GOOS: "linux", GOARCH: "386", GO386: "softfloat",
		Commands: []string{"example.com/fw/cmd/a", "example.com/fw/cmd/b"},
		Tags:     []string{"goshsmall"}, Flags: []string{"-trimpath"}}
}

func key(t *testing.T, in Inputs) string {
	t.Helper()
	k, err := Key(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(k) != 64 {
		t.Fatalf("key %q is not a hex sha256", k)
	}
	return k
}

func TestKey(t *testing.T) {
	dir := testModule(t)
	base := key(t, testInputs(dir))
	if again := key(t, testInputs(dir)); again != base {
		t.Fatalf("the same inputs give two keys: %s, %s", base, again)
	}
	write := func(name, data string) func() {
		p := filepath.Join(dir, name)
		old, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return func() {
			if old == nil {
				os.Remove(p)
			} else if err := os.WriteFile(p, old, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Changes that must not change the key: nothing compiled in.
	for _, c := range []struct{ name, file, data string }{
		{"site config", "sites/router.yaml", "kind: site\nboard: alix2d13\nhostname: other\n"},
		{"test file", "lib/lib_test.go", "package lib\n\n// changed\n"},
		{"file of another GOARCH", "lib/lib_arm.go", "package lib\n\nconst arm = false\n"},
		{"non-Go file", "lib/notes/readme.md", "still not compiled\n"},
		{"new package nothing imports", "other/other.go", "package other\n"},
	} {
		undo := write(c.file, c.data)
		if k := key(t, testInputs(dir)); k != base {
			t.Errorf("changing the %s (%s) changed the key", c.name, c.file)
		}
		undo()
	}
	// Changes that must.
	seen := map[string]string{base: "base"}
	differs := func(what string, k string) {
		t.Helper()
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key %.12s is the same as for %s", what, k, prev)
		}
		seen[k] = what
	}
	for _, c := range []struct{ name, file, data string }{
		{"source of an imported package", "lib/lib.go", "package lib\n\nimport \"fmt\"\n\nfunc Hello() { fmt.Println(\"hello, world\") }\n"},
		{"a command's source", "cmd/b/main.go", "package main\n\nfunc main() { println() }\n"},
		{"new file in a compiled package", "lib/more.go", "package lib\n\nvar More = 1\n"},
		{"go.mod", "go.mod", "module example.com/fw\n\ngo 1.22\n"},
		{"go.sum", "go.sum", "example.com/x v1.0.0 h1:AAAA=\n"},
	} {
		undo := write(c.file, c.data)
		differs(c.name, key(t, testInputs(dir)))
		undo()
	}
	if k := key(t, testInputs(dir)); k != base {
		t.Fatalf("the restored module has key %.12s, not %.12s", k, base)
	}
	for _, c := range []struct {
		name string
		mod  func(*Inputs)
	}{
		{"GOARCH", func(in *Inputs) { in.GOARCH, in.GO386, in.GOARM = "arm", "", "5" }},
		{"GOARM", func(in *Inputs) { in.GOARCH, in.GO386, in.GOARM = "arm", "", "6" }},
		{"GO386", func(in *Inputs) { in.GO386 = "sse2" }},
		{"command list", func(in *Inputs) { in.Commands = in.Commands[:1] }},
		{"command order", func(in *Inputs) { in.Commands = []string{in.Commands[1], in.Commands[0]} }},
		{"tags", func(in *Inputs) { in.Tags = nil }},
		{"flags", func(in *Inputs) { in.Flags = append(in.Flags, "-a") }},
	} {
		in := testInputs(dir)
		c.mod(&in)
		differs(c.name, key(t, in))
	}
	// A file only one GOARCH compiles counts for that GOARCH.
	arm := testInputs(dir)
	arm.GOARCH, arm.GO386, arm.GOARM = "arm", "", "5"
	armKey := key(t, arm)
	undo := write("lib/lib_arm.go", "package lib\n\nconst arm = false\n")
	if key(t, arm) == armKey {
		t.Errorf("changing lib_arm.go did not change the arm key")
	}
	undo()

	// A command that does not build is an error, not a key.
	in := testInputs(dir)
	in.Commands = append(in.Commands, "example.com/fw/cmd/missing")
	if k, err := Key(context.Background(), in); err == nil {
		t.Errorf("a missing command gave key %s", k)
	}
}

func writeRandom(t *testing.T, p string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func keyOf(i int) string { return fmt.Sprintf("%064x", i+1) }

func TestPutGet(t *testing.T) {
	c := &Cache{Dir: filepath.Join(t.TempDir(), "userland")}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	data := writeRandom(t, src, 100000)
	dst := filepath.Join(tmp, "dst")
	if hit, err := c.Get(keyOf(0), dst); err != nil || hit {
		t.Fatalf("empty cache: hit %v, %v", hit, err)
	}
	if err := c.Put(keyOf(0), src); err != nil {
		t.Fatal(err)
	}
	if hit, err := c.Get(keyOf(0), dst); err != nil || !hit {
		t.Fatalf("after Put: hit %v, %v", hit, err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatalf("Get gave %d bytes, not the %d stored", len(got), len(data))
	}
	if hit, _ := c.Get(keyOf(1), dst); hit {
		t.Fatal("another key hit")
	}
	if _, err := c.Get("../../etc/passwd", dst); err == nil {
		t.Fatal("a key that is not a sha256 was accepted")
	}
}

// Entries over the bound go, least recently used first; Get marks use.
func TestEvictLRU(t *testing.T) {
	c := &Cache{Dir: t.TempDir(), MaxBytes: 350000}
	var logged []string
	c.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writeRandom(t, src, 100000)
	past := time.Now().Add(-time.Hour)
	for i := 0; i < 3; i++ {
		if err := c.Put(keyOf(i), src); err != nil {
			t.Fatal(err)
		}
		// Distinct, ordered use times: 0 oldest.
		tm := past.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(c.Dir, keyOf(i)+entryExt), tm, tm); err != nil {
			t.Fatal(err)
		}
	}
	// Using 0 makes 1 the least recently used.
	if hit, err := c.Get(keyOf(0), filepath.Join(tmp, "dst")); !hit || err != nil {
		t.Fatalf("Get 0: %v %v", hit, err)
	}
	if err := c.Put(keyOf(3), src); err != nil {
		t.Fatal(err)
	}
	have := func(i int) bool {
		_, err := os.Stat(filepath.Join(c.Dir, keyOf(i)+entryExt))
		return err == nil
	}
	for i, want := range []bool{true, false, true, true} {
		if have(i) != want {
			t.Errorf("entry %d present: %v, want %v (log %q)", i, have(i), want, logged)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "evicted "+keyOf(1)) {
		t.Errorf("log: %q, want one eviction of entry 1", logged)
	}
	// An entry bigger than the bound stays (it was just built) and pushes
	// out all the others.
	big := filepath.Join(tmp, "big")
	writeRandom(t, big, 400000)
	if err := c.Put(keyOf(4), big); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, false, false, false, true} {
		if have(i) != want {
			t.Errorf("after the big entry: entry %d present: %v, want %v", i, have(i), want)
		}
	}
}

// A truncated, altered or headerless entry is a miss: removed and logged,
// and a new Put makes it good again.
func TestCorruptEntry(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(data []byte) []byte
		why    string
	}{
		{"truncated", func(d []byte) []byte { return d[:len(d)-1000] }, "bytes, its header says"},
		{"flipped byte", func(d []byte) []byte { d[len(d)-10] ^= 1; return d }, "sha256"},
		{"appended", func(d []byte) []byte { return append(d, 'x') }, "bytes, its header says"},
		{"no header", func(d []byte) []byte { return d[bytes.IndexByte(d, '\n')+1:] }, "header"},
		{"empty", func(d []byte) []byte { return nil }, "no header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logged []string
			cache := &Cache{Dir: t.TempDir(), Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
			tmp := t.TempDir()
			src := filepath.Join(tmp, "src")
			want := writeRandom(t, src, 50000)
			if err := cache.Put(keyOf(0), src); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(cache.Dir, keyOf(0)+entryExt)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, c.damage(data), 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(tmp, "dst")
			if hit, err := cache.Get(keyOf(0), dst); hit || err != nil {
				t.Fatalf("damaged entry: hit %v, %v", hit, err)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("the damaged entry is still there (%v)", err)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Errorf("a damaged entry left %s (%v)", dst, err)
			}
			if len(logged) != 1 || !strings.Contains(logged[0], "corrupt") || !strings.Contains(logged[0], c.why) {
				t.Errorf("log %q, want one line saying the entry is corrupt (%s)", logged, c.why)
			}
			// Rebuilt: stored again and found.
			if err := cache.Put(keyOf(0), src); err != nil {
				t.Fatal(err)
			}
			if hit, err := cache.Get(keyOf(0), dst); !hit || err != nil {
				t.Fatalf("after storing again: hit %v, %v", hit, err)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
				t.Fatal("the entry stored again reads back different")
			}
		})
	}
}

// Goroutines storing and reading the same and different keys at once
// (each with its own Cache value and lock file descriptor, as two
// processes have) only ever read whole entries.
func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	const n = 8
	srcs := make([][]byte, 2)
	for i := range srcs {
		srcs[i] = writeRandom(t, filepath.Join(tmp, fmt.Sprint("src", i)), 300000)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	var hits sync.Map
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			c := &Cache{Dir: dir, MaxBytes: 1 << 20}
			k := g % 2
			for r := 0; r < 10; r++ {
				dst := filepath.Join(tmp, fmt.Sprintf("dst-%d-%d", g, r))
				hit, err := c.Get(keyOf(k), dst)
				if err != nil {
					errs <- err
					return
				}
				if hit {
					got, err := os.ReadFile(dst)
					if err != nil || !bytes.Equal(got, srcs[k]) {
						errs <- fmt.Errorf("goroutine %d read a wrong entry %d (%d bytes, %v)", g, k, len(got), err)
						return
					}
					hits.Store(g, true)
					continue
				}
				if err := c.Put(keyOf(k), filepath.Join(tmp, fmt.Sprint("src", k))); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	count := 0
	hits.Range(func(any, any) bool { count++; return true })
	if count != n {
		t.Errorf("%d of %d goroutines ever hit", count, n)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}
}

// Building lets one build of a key run at a time: a second waits, says
// it waited, and then finds what the first stored; a build of another
// key does not wait; a waiter whose context ends gives up with its error.
func TestBuilding(t *testing.T) {
	waiting := make(chan string, 10)
	c := &Cache{Dir: t.TempDir(), Log: func(f string, a ...any) { waiting <- fmt.Sprintf(f, a...) }}
	ctx := context.Background()
	unlock, waited, err := c.Building(ctx, keyOf(1))
	if err != nil || waited {
		t.Fatalf("first build: waited %v, %v", waited, err)
	}
	other, waited, err := c.Building(ctx, keyOf(2))
	if err != nil || waited {
		t.Fatalf("another key: waited %v, %v", waited, err)
	}
	other()

	got := make(chan bool, 1)
	go func() {
		u, w, err := c.Building(ctx, keyOf(1))
		if err != nil {
			t.Error(err)
			got <- false
			return
		}
		defer u()
		hit, err := c.Get(keyOf(1), filepath.Join(t.TempDir(), "out"))
		got <- w && hit && err == nil
	}()
	select {
	case line := <-waiting:
		if !strings.Contains(line, "waiting for it") {
			t.Errorf("the waiting build logged %q", line)
		}
	case <-got:
		t.Fatal("a second build of the key did not wait for the first")
	case <-time.After(time.Minute):
		t.Fatal("a second build of the key neither waited nor went on")
	}
	src := filepath.Join(t.TempDir(), "userland")
	if err := os.WriteFile(src, []byte("built once"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(keyOf(1), src); err != nil {
		t.Fatal(err)
	}
	unlock()
	if !<-got {
		t.Error("the waiting build did not say it waited, or did not find the entry")
	}

	unlock, _, err = c.Building(ctx, keyOf(1))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, waited, err := c.Building(cctx, keyOf(1)); err != context.DeadlineExceeded || !waited {
		t.Errorf("a waiter whose context ended: waited %v, %v; want context.DeadlineExceeded", waited, err)
	}
}
