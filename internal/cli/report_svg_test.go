package cli

import (
	"os"
	"strings"
	"testing"
)

// report draws a chart only when asked: without -o it writes no file at
// all, in the current directory or elsewhere.
func TestReportWritesNoChartUnasked(t *testing.T) {
	card := cardWithReports(t, 1)
	dir := t.TempDir()
	t.Chdir(dir)
	out, errs, code := ocfw(t, "report", card)
	if code != 0 || !strings.Contains(out, "1 boots, 1 reports kept") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(errs, "chart written") {
		t.Errorf("a chart was written unasked: %s", errs)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("report left %v in the current directory", es)
	}
	if _, errs, code := ocfw(t, "report", card, "-o", "chart.png"); code == 0 || !strings.Contains(errs, ".svg") {
		t.Errorf("-o chart.png: exit %d, %s; want a refusal naming .svg", code, errs)
	}
}
