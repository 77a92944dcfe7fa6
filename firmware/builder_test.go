package firmware

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/buildinfo"
	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/plan"
)

// The manifest, beside the image and inside it, names the source the
// builder came from: revision, uncommitted changes, Go, key modules.
func TestManifestNamesBuilder(t *testing.T) {
	if err := CheckTools(plan.BootBIOSCF); err != nil {
		labtest.SkipOrFail(t, "%v", err)
	}
	img := filepath.Join(t.TempDir(), "alix.img")
	m, err := Build(context.Background(), testPlan(t, "alix2d13"), x86Payload(t), ImageOptions{Output: img, SourceDateEpoch: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	want := buildinfo.Get()
	if m.Tool != want.Tool() || !strings.HasPrefix(m.Tool, "ocfw ") {
		t.Errorf("tool %q, want %q", m.Tool, want.Tool())
	}
	if m.Builder == nil || !reflect.DeepEqual(*m.Builder, want.Source) {
		t.Fatalf("builder %+v, want %+v", m.Builder, want.Source)
	}
	if m.Builder.Go == "" || len(m.Builder.Modules) != len(buildinfo.KeyModules) {
		t.Errorf("builder lacks the Go or module versions: %+v", m.Builder)
	}
	// Inside the image: read it without the sidecar.
	if err := os.Remove(ManifestPath(img)); err != nil {
		t.Fatal(err)
	}
	info, err := Inspect(img)
	if err != nil {
		t.Fatal(err)
	}
	if info.Manifest == nil || !strings.HasPrefix(info.ManifestFrom, "partition 1") {
		t.Fatalf("no manifest inside the image (from %q)", info.ManifestFrom)
	}
	if b := info.Manifest.Builder; b == nil || b.Revision != want.Revision || b.Modified != want.Modified {
		t.Errorf("the manifest inside the image names builder %+v, want %+v", b, want.Source)
	}
}
