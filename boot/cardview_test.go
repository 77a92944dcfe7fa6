package boot

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/site"
	"github.com/ocfw/ocfw/store"
)

// The sftp view shows the card's reports and its log as of now, the
// site config in use and the plan; never a value of the store (the
// host keys live there) nor a key file.
func TestCardView(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, plan.File), []byte(`{"board": "test"}`))
	data := dataPartition(t)
	f, err := os.OpenFile(data, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	st, err := store.Open(f, fi.Size(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, js := range []string{`{"boot": 1}`, `{"boot": 2}`} {
		n, err := st.BeginBoot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutReport(n, []byte(js)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetValue("ssh_host_key", "SECRET-HOST-KEY"); err != nil {
		t.Fatal(err)
	}
	sc := &site.Site{Kind: "site", Hostname: "gw"}
	view := cardView(&Config{Root: root}, st)
	st.Log("logged after the view was made")

	got := map[string]string{}
	for _, v := range view(sc) {
		b, err := v.Read()
		if err != nil && v.Path != "manifest.json" { // no boot partition here
			t.Errorf("%s: %v", v.Path, err)
		}
		got[v.Path] = string(b)
	}
	var paths []string
	for p := range got {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if want := "log.txt manifest.json plan.json report.json reports/boot-1.json reports/boot-2.json site.json"; strings.Join(paths, " ") != want {
		t.Errorf("view: %v, want %s", paths, want)
	}
	for p, want := range map[string]string{"report.json": `{"boot": 2}`, "reports/boot-1.json": `{"boot": 1}`, "plan.json": `{"board": "test"}`} {
		if got[p] != want {
			t.Errorf("%s: %q, want %q", p, got[p], want)
		}
	}
	if !strings.Contains(got["log.txt"], " logged after the view was made\n") {
		t.Errorf("log.txt is not current:\n%s", got["log.txt"])
	}
	if !strings.Contains(got["site.json"], `"hostname": "gw"`) {
		t.Errorf("site.json: %s", got["site.json"])
	}
	for p, c := range got {
		if strings.Contains(c, "SECRET-HOST-KEY") {
			t.Errorf("%s shows a store value", p)
		}
	}
}
