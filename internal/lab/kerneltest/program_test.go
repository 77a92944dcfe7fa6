package kerneltest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/u-root/u-root/pkg/cpio"
)

func TestWriteFiles(t *testing.T) {
	files := map[string][]byte{"/etc/worldvm/id": []byte("key"), "/root/x": []byte("x")}
	var a, b bytes.Buffer
	if err := WriteFiles(&a, files); err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(&b, files); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same files gave different archives")
	}
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(a.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		line := r.Name + " " + cpio.LSInfoFromRecord(r).Mode.String()
		if r.Mode&cpio.S_IFMT == cpio.S_IFREG {
			body, _ := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
			line += " " + string(body)
		}
		got = append(got, line)
	}
	want := []string{"etc drwxr-xr-x", "etc/worldvm drwxr-xr-x", "etc/worldvm/id -rw------- key", "root drwxr-xr-x", "root/x -rw------- x"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("archive:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"etc/x", "/etc/../x", "/"} {
		if err := WriteFiles(io.Discard, map[string][]byte{bad: nil}); err == nil {
			t.Errorf("WriteFiles accepted %q", bad)
		}
	}
}
