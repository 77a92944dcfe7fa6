package rootfs

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/plan"
)

// The userland's go build gets the target's variables whatever the
// process environment holds, and the process environment is not changed.
func TestBuildEnvWinsOverTheProcess(t *testing.T) {
	base := []string{"PATH=/usr/bin", "GOARM=7", "GO386=sse2", "GOFLAGS=-race -mod=vendor", "CGO_ENABLED=1", "GOARCH=arm"}
	for _, c := range []struct {
		name   string
		target plan.GoTarget
		want   map[string]string // "" : set to empty (the toolchain's default)
	}{
		{"ARMv5", plan.GoTarget{GOOS: "linux", GOARCH: "arm", GOARM: "5"},
			map[string]string{"GOARM": "5", "GO386": "", "GOFLAGS": "", "CGO_ENABLED": "0", "GOARCH": "arm", "PATH": "/usr/bin", "GOTMPDIR": "/tmp/x/gotmp"}},
		{"Geode", plan.GoTarget{GOOS: "linux", GOARCH: "386", GO386: "softfloat"},
			map[string]string{"GOARM": "", "GO386": "softfloat", "GOFLAGS": "", "CGO_ENABLED": "0"}},
	} {
		b := &busyboxBuilder{gotmp: "/tmp/x/gotmp", env: goEnv(c.target)}
		cmd := exec.Command("go")
		cmd.Env = b.buildEnv(base)
		got := map[string]string{}
		for _, kv := range cmd.Environ() { // as the command gets it: the last of each name
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		for k, v := range c.want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s=%q (set %v), want %q", c.name, k, g, ok, v)
			}
		}
		if base[1] != "GOARM=7" {
			t.Fatalf("buildEnv changed its base: %v", base)
		}
	}
}
