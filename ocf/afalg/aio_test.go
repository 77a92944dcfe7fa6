package afalg

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestIocbLayout(t *testing.T) {
	var cb iocb
	if s := unsafe.Sizeof(cb); s != 64 {
		t.Errorf("iocb is %d bytes, the kernel's is 64", s)
	}
	offsets := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"aio_lio_opcode", unsafe.Offsetof(cb.opcode), 16},
		{"aio_fildes", unsafe.Offsetof(cb.fildes), 20},
		{"aio_buf", unsafe.Offsetof(cb.buf), 24},
		{"aio_nbytes", unsafe.Offsetof(cb.nbytes), 32},
		{"aio_offset", unsafe.Offsetof(cb.offset), 40},
		{"aio_flags", unsafe.Offsetof(cb.flags), 56},
	}
	for _, o := range offsets {
		if o.got != o.want {
			t.Errorf("%s at offset %d, kernel has %d", o.name, o.got, o.want)
		}
	}
	if s := unsafe.Sizeof(ioEvent{}); s != 32 {
		t.Errorf("io_event is %d bytes, the kernel's is 32", s)
	}
}

// The AIO plumbing is the same for files and AF_ALG sockets, so it is
// checked on the host with reads from a file.
func TestAIOReadFile(t *testing.T) {
	want := make([]byte, 4096)
	for i := range want {
		want[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 4
	a, err := newAIO(n)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("no Linux AIO here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var files []*os.File
	bufs := make([][]byte, n)
	for i := range n {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		bufs[i] = make([]byte, 512*(i+1))
		a.prepRead(i, int(f.Fd()), bufs[i], uint64(100+i))
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	m, err := a.submit(n)
	if err != nil || m != n {
		t.Fatalf("submit = %d, %v; want %d", m, err, n)
	}
	evs, err := a.wait(n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, ev := range evs {
		i := int(ev.data) - 100
		if i < 0 || i >= n || seen[ev.data] {
			t.Fatalf("event data %d unexpected", ev.data)
		}
		seen[ev.data] = true
		if ev.res != int64(len(bufs[i])) {
			t.Errorf("read %d: res %d, want %d", i, ev.res, len(bufs[i]))
		}
		if !bytes.Equal(bufs[i], want[:len(bufs[i])]) {
			t.Errorf("read %d: wrong data", i)
		}
	}
}

func TestAIOSubmitBadFD(t *testing.T) {
	a, err := newAIO(1)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("no Linux AIO here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	a.prepRead(0, -1, make([]byte, 16), 0)
	if n, err := a.submit(1); !errors.Is(err, unix.EBADF) {
		t.Errorf("submit on fd -1 = %d, %v; want EBADF", n, err)
	}
}
