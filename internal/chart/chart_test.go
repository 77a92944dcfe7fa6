package chart

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/ocf/esp"
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
	data, err := Data([]Source{{Report: r}}, RefAll)
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
	if !strings.Contains(svg.String(), "published: ") || !strings.Contains(svg.String(), "aes-128-cbc: throughput") {
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

func TestLabelsAndReferenceChoice(t *testing.T) {
	alix := &report.Report{Version: report.Version, Boot: 3, Env: report.Environment{Board: "alix2d13", Machine: "QEMU Standard PC (i440FX + PIIX, 1996)",
		Engines: []report.Engine{{ID: "geode-aes", Driver: "cbc-aes-geode"}, {ID: "hifn-795x", Driver: "cbc-aes-hifn0"}}}}
	alix.Speed = []speed.Row{
		{Engine: "go", Cipher: "aes-128-cbc", Cells: []speed.Cell{{Size: 16, KBps: 1000}, {Size: 8192, KBps: 2000}}},
		{Engine: "cbc-aes-geode", Cipher: "aes-128-cbc", Hardware: true, Cells: []speed.Cell{{Size: 16, KBps: 500}, {Size: 8192, KBps: 9000}}},
	}
	host := &report.Report{Version: report.Version, Speed: alix.Speed[:1]}
	for _, tc := range []struct {
		name    string
		sources []Source
		ref     string
		want    []string // labels that must appear
		wantNot []string
		pub     int // published series in the aes-128-cbc panel; -1: any > 0
	}{
		{"board, boot, QEMU and hardware named", []Source{{Report: alix}}, RefNone,
			[]string{"alix2d13 boot 3 (QEMU): go", "alix2d13 boot 3 (QEMU): cbc-aes-geode [hardware]"}, nil, 0},
		{"auto: Geode boards and the planned engines", []Source{{Report: alix}}, RefAuto,
			[]string{"published: ALIX 2d13 AMD Geode LX800 500MHz (NetBSD glxsb), glxsb engine", "published: FreeBSD 4-stable, hifn vpn1401 (cryptodev), hifn engine"},
			[]string{"IXP425 533MHz XScale (Linux 2.4 OCF, 2004), ixp engine"}, -1},
		{"auto for a host report overlays nothing", []Source{{Report: host}}, RefAuto, []string{"host: go"}, nil, 0},
		{"words pick platforms", []Source{{Report: host, Label: "my laptop"}}, "IXP425", []string{"my laptop: go", "published: IXP425 533MHz XScale + Safenet 1141 + Hifn 7956 (Linux OCF), user-space software"},
			[]string{"Geode"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := Data(tc.sources, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			var labels []string
			pub := 0
			for _, s := range data["aes-128-cbc"] {
				labels = append(labels, s.Label)
				if s.Dashed {
					pub++
				}
			}
			all := strings.Join(labels, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("legend lacks %q:\n%s", w, all)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(all, w) {
					t.Errorf("legend has %q:\n%s", w, all)
				}
			}
			if (tc.pub < 0 && pub == 0) || (tc.pub >= 0 && pub != tc.pub) {
				t.Errorf("%d published series, want %d", pub, tc.pub)
			}
		})
	}
	if _, err := Data([]Source{{Report: host}}, " , "); err == nil {
		t.Error("an empty --reference list accepted")
	}
}

// TestESPPanel: a report's ESP rows become a panel of their own, one
// series per engine in kB/s, failed rows left out.
func TestESPPanel(t *testing.T) {
	r := sampleReport(t)
	r.ESP = &report.ESP{Result: &esp.Result{Cipher: "aes-128-cbc", Auth: "hmac-sha1", Rows: []esp.Row{
		{Engine: "kernel-soft", Size: 1400, MBps: 0.39},
		{Engine: "kernel-soft", Size: 64, MBps: 0.04},
		{Engine: "virtio-crypto", Hardware: true, Size: 64, MBps: 0.02},
		{Engine: "virtio-crypto", Hardware: true, Size: 1400, MBps: 0.71},
		{Engine: "testaes", Hardware: true, Size: 64, Err: "stalled"},
	}}, Basis: report.BasisESP}
	data, err := Data([]Source{{Report: r, Label: "alix"}}, RefNone)
	if err != nil {
		t.Fatal(err)
	}
	got := data[ESPPanel("aes-128-cbc", "hmac-sha1")]
	if len(got) != 2 {
		t.Fatalf("ESP panel has %d series, want 2 (the stalled engine left out): %+v", len(got), got)
	}
	if got[0].Label != "alix: kernel-soft (ESP)" || got[0].Points[0] != [2]float64{64, 40} || got[0].Points[1] != [2]float64{1400, 390} {
		t.Errorf("software series %+v", got[0])
	}
	if !got[1].Hardware || !strings.HasSuffix(got[1].Label, "[hardware]") {
		t.Errorf("virtio series not marked hardware: %+v", got[1])
	}
	var svg bytes.Buffer
	if err := WriteSVG(&svg, data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "ESP aes-128-cbc+hmac-sha1") {
		t.Error("the SVG has no ESP panel")
	}
}

// A kept report's fallback name already ends in its boot: the legend
// says the boot once ("boot 1 boot 1" was the bug).
func TestLabelBootOnce(t *testing.T) {
	for _, tc := range []struct {
		r        report.Report
		fallback string
		want     string
	}{
		{report.Report{Boot: 1}, "ocfw-alix2d13.img boot 1", "ocfw-alix2d13.img boot 1"},
		{report.Report{Boot: 12}, "x.img boot 1", "x.img boot 1 boot 12"},
		{report.Report{Boot: 2, Env: report.Environment{Board: "alix2d13"}}, "ignored", "alix2d13 boot 2"},
		{report.Report{}, "", "host"},
	} {
		if got := Label(&tc.r, tc.fallback); got != tc.want {
			t.Errorf("Label(boot %d, %q) = %q, want %q", tc.r.Boot, tc.fallback, got, tc.want)
		}
	}
}
