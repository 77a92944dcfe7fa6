package main

import (
	"strings"
	"testing"
)

// confirm names the generation it keeps; a bare confirm is only for a
// person at a terminal. Neither refusal reaches the router.
func TestConfirmArgs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		terminal bool
		want     string
	}{
		{nil, false, "name the pushed config to keep (ocf config confirm N"},
		{[]string{"x"}, true, `confirm "x": give the pushed config's number`},
		{[]string{"0"}, false, `confirm "0": give the pushed config's number`},
		{[]string{"1", "2"}, false, "accepts at most 1 arg"},
	} {
		cmd := newConfirmCmd(func() bool { return tc.terminal })
		cmd.SetArgs(tc.args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("confirm %q (terminal %v): %v, want %q", tc.args, tc.terminal, err, tc.want)
		}
	}
}
