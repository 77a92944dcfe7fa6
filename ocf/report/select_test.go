package report

import (
	"reflect"
	"testing"

	"github.com/ocfw/ocfw/ocf/selftest"
)

func TestChoose(t *testing.T) {
	r := func(boot int) *Report { return &Report{Boot: boot} }
	kept := []*Report{r(9), nil, r(7), r(5)} // newest first; boot 8 unreadable
	boots := func(rs []*Report) []int {
		var b []int
		for _, r := range rs {
			b = append(b, r.Boot)
		}
		return b
	}
	for _, tc := range []struct {
		name        string
		all         bool
		want        []int
		got, missed []int
	}{
		{"newest", false, nil, []int{9}, nil},
		{"all", true, nil, []int{9, 7, 5}, nil},
		{"asked", false, []int{5, 7}, []int{7, 5}, nil},
		{"unreadable and unknown", false, []int{8, 7, 3}, []int{7}, []int{8, 3}},
	} {
		got, missed := Choose(kept, tc.all, tc.want)
		if !reflect.DeepEqual(boots(got), tc.got) || !reflect.DeepEqual(missed, tc.missed) {
			t.Errorf("%s: chose %v, missing %v; want %v, %v", tc.name, boots(got), missed, tc.got, tc.missed)
		}
	}
	if got, _ := Choose([]*Report{nil}, false, nil); len(got) != 0 {
		t.Errorf("only unreadable reports: chose %d", len(got))
	}
}

func TestTallyAndSummary(t *testing.T) {
	r := &Report{Env: Environment{Board: "alix2d13", Kernel: "6.1.0", Machine: "QEMU Standard PC"}, SelfTest: []selftest.Result{
		{Engine: "glxsb", Status: selftest.Pass}, {Engine: "hifn0", Status: selftest.Fail},
		{Engine: "hifn0", Status: selftest.Fail}, {Engine: "safe0", Status: selftest.Absent}, {Engine: "x", Status: "odd"},
	}}
	if got, want := r.Tally(), (Tally{Passed: 1, Failed: 2, Absent: 2}); got != want {
		t.Errorf("Tally = %+v, want %+v", got, want)
	}
	if got, want := r.Summary(), "alix2d13, kernel 6.1.0: self-test 1 passed, 2 failed, 2 absent (QEMU)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got, want := (&Report{}).Summary(), "?, kernel ?: self-test 0 passed, 0 failed, 0 absent"; got != want {
		t.Errorf("empty Summary = %q, want %q", got, want)
	}
	if got := r.FailedEngines(); !reflect.DeepEqual(got, []string{"hifn0"}) {
		t.Errorf("FailedEngines = %v, want [hifn0]", got)
	}
	for _, tc := range []struct {
		r    *Report
		want string
	}{
		{&Report{Boot: 3, Env: Environment{Board: "nslu2"}}, "nslu2-boot-3.json"},
		{&Report{}, "host-report.json"},
	} {
		if got := tc.r.ExportName(); got != tc.want {
			t.Errorf("ExportName = %q, want %q", got, tc.want)
		}
	}
}
