package firmware

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
	"github.com/ulikunitz/xz"
)

// cpioWith is a newc archive of a few files, as rootfs writes one.
func cpioWith(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := cpio.Newc.Writer(&buf)
	recs := []cpio.Record{cpio.Directory("etc", 0o755), cpio.StaticFile("init", strings.Repeat("x", 1001), 0o755)}
	for name, data := range files {
		recs = append(recs, cpio.StaticFile(name, data, 0o644))
	}
	if err := cpio.WriteRecords(w, recs); err != nil {
		t.Fatal(err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCheckInitramfsBoard(t *testing.T) {
	dir := t.TempDir()
	planJSON, err := testPlan(t, "net5501").JSON()
	if err != nil {
		t.Fatal(err)
	}
	archive := cpioWith(t, map[string]string{"etc/ocfw/plan.json": string(planJSON), "etc/ocfw/boot.json": "{}"})
	var xzb, gzb bytes.Buffer
	xw, _ := xz.NewWriter(&xzb)
	xw.Write(archive)
	xw.Close()
	gw := gzip.NewWriter(&gzb)
	gw.Write(archive)
	gw.Close()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, b := range map[string][]byte{"initrd.cpio": archive, "initrd.xz": xzb.Bytes(), "initrd.gz": gzb.Bytes(),
		"two.cpio": append(append(cpioWith(t, nil), 0, 0, 0, 0), archive...)} {
		p := write(name, b)
		if err := CheckInitramfsBoard(p, "net5501"); err != nil {
			t.Errorf("%s for net5501: %v", name, err)
		}
		err := CheckInitramfsBoard(p, "alix2d13")
		if err == nil || !strings.Contains(err.Error(), `was built for board "net5501"`) || !strings.Contains(err.Error(), "not alix2d13") {
			t.Errorf("%s for alix2d13: %v, want a refusal naming both boards", name, err)
		}
	}
	noPlan := write("noplan.cpio", cpioWith(t, map[string]string{"etc/ocfw/boot.json": "{}"}))
	if err := CheckInitramfsBoard(noPlan, "alix2d13"); !errors.Is(err, ErrNoPlan) {
		t.Errorf("no plan: %v, want ErrNoPlan", err)
	}
	for name, b := range map[string][]byte{
		"garbage":   []byte("hello, world"),
		"cut short": archive[:len(archive)/2],
		"bad xz":    append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 1000)...),
	} {
		if err := CheckInitramfsBoard(write("bad", b), "net5501"); err == nil || errors.Is(err, ErrNoPlan) {
			t.Errorf("%s: %v, want an error saying it is damaged", name, err)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- CheckInitramfsBoard(fifo, "net5501") }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocked on a FIFO")
	}
}

// A stand-in image's site config is read from the initramfs beside it,
// xz-compressed as the build writes it; none there is nil, a missing or
// damaged initramfs an error naming it.
func TestStandInSite(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "avila.img")
	write := func(archive []byte) {
		t.Helper()
		var xzb bytes.Buffer
		xw, err := xz.NewWriter(&xzb)
		if err != nil {
			t.Fatal(err)
		}
		xw.Write(archive)
		xw.Close()
		if err := os.WriteFile(StandInSidecars(img).Initramfs, xzb.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := StandInSite(img); err == nil || !strings.Contains(err.Error(), "avila.initrd") {
		t.Errorf("no initramfs: %v, want an error naming it", err)
	}
	write(cpioWith(t, map[string]string{"etc/ocfw/site.json": `{"board":"avila-gw2348","hostname":"avila","wan":{"port":"wan"},"lan":{"ports":["lan"]}}`}))
	s, err := StandInSite(img)
	if err != nil || s == nil || s.Hostname != "avila" || s.WAN.Port != "wan" || len(s.LAN.Ports) != 1 {
		t.Errorf("site: %+v, %v", s, err)
	}
	write(cpioWith(t, map[string]string{"etc/ocfw/boot.json": "{}"}))
	if s, err := StandInSite(img); s != nil || err != nil {
		t.Errorf("no site: %+v, %v; want nil, nil", s, err)
	}
	if err := os.WriteFile(StandInSidecars(img).Initramfs, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := StandInSite(img); err == nil || !strings.Contains(err.Error(), "avila.initrd") {
		t.Errorf("damaged: %v, want an error naming the initramfs", err)
	}
}
