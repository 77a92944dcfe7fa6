// Package proctest helps tests prove that an interrupted job left
// nothing behind: no process still working in its directory, no file
// added to it. It is for tests only.
package proctest

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Using lists the processes (as "PID cmdline") whose working directory
// is inside dir or whose command line names a path inside it: the
// children of a build in dir, compilers and linkers included.
func Using(dir string) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		p := filepath.Join("/proc", e.Name())
		raw, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		if inside(cwd, dir) || strings.Contains(cmdline, dir+"/") {
			out = append(out, e.Name()+" "+cmdline)
		}
	}
	return out
}

func inside(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Tree lists every path under dir (relative, sorted; directories end in
// "/"), so a test can compare a directory before and after.
func Tree(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}
