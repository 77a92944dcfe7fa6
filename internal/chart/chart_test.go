package chart

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf/report"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/ocf/speed"
)

func TestReference(t *testing.T) {
	pub, err := ReferenceResults()
	if err != nil {
		t.Fatal(err)
	}
	if len(pub) != 290 { // every data line of the CSV
		t.Errorf("%d published rows", len(pub))
	}
	var geode bool
	for _, p := range pub {
		if p.Module == "glxsb" && p.Cipher == "aes-128-cbc" && p.Size == 8192 && p.KBps > 20000 {
			geode = true
		}
	}
	if !geode {
		t.Error("the ALIX glxsb rows are missing")
	}
	if _, err := ParseReference(strings.NewReader("a,b\n")); err == nil {
		t.Error("bad header accepted")
	}
}

func TestChartSVG(t *testing.T) {
	r := sampleReport(t)
	data, err := Data([]*report.Report{r}, []string{"host"}, true)
	if err != nil {
		t.Fatal(err)
	}
	var svg bytes.Buffer
	if err := WriteSVG(&svg, data); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML with one polyline per series.
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if want := len(data["aes-128-cbc"]); lines != want || want < 3 {
		t.Errorf("%d polylines, %d series", lines, want)
	}
	if !strings.Contains(svg.String(), "(published)") || !strings.Contains(svg.String(), "aes-128-cbc: throughput") {
		t.Error("chart lacks the published overlay or its title")
	}
	var again bytes.Buffer
	WriteSVG(&again, data)
	if !bytes.Equal(svg.Bytes(), again.Bytes()) {
		t.Error("same data, different SVG bytes")
	}
	if err := WriteSVG(&again, map[string][]Series{}); err == nil {
		t.Error("empty chart accepted")
	}
}

// sampleReport has real speed rows: Go software measured on this host.
func sampleReport(t *testing.T) *report.Report {
	t.Helper()
	r := &report.Report{Version: report.Version, Env: report.HostEnvironment()}
	for _, c := range []string{"aes-128-cbc"} {
		r.Speed = append(r.Speed, speed.Measure(soft.New(), c, speed.Options{Duration: 5 * time.Millisecond}))
	}
	return r
}
