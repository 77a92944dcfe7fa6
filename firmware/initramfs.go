package firmware

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ocfw/ocfw/site"

	"github.com/ulikunitz/xz"

	"github.com/ocfw/ocfw/firmware/mbr"
	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/internal/regfile"
	"github.com/ocfw/ocfw/plan"
)

// ErrNoPlan marks an initramfs that holds no etc/ocfw/plan.json: not one
// ocfw built.
var ErrNoPlan = errors.New("no " + strings.TrimPrefix(plan.File, "/") + " in it")

// maxInitramfs bounds how much of a decompressed initramfs is read
// looking for the plan: the boards' are a few MiB.
const maxInitramfs = 512 << 20

// CheckInitramfsBoard reads the plan inside a ready initramfs (a newc
// cpio archive, plain or compressed with xz or gzip, as ocfw build
// writes it) and refuses one built for a board other than board. An
// archive without a plan is an error that wraps ErrNoPlan; one that is
// not an initramfs at all is an error too.
func CheckInitramfsBoard(path, board string) error {
	pl, err := InitramfsPlan(path)
	if err != nil {
		return err
	}
	if pl.Board != board {
		return &InitramfsBoardError{Path: path, Built: pl.Board, Board: board}
	}
	return nil
}

// InitramfsPlan returns the plan inside an initramfs.
func InitramfsPlan(path string) (*plan.Plan, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return nil, &InitramfsError{Err: err}
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic, _ := br.Peek(6)
	var r io.Reader
	switch {
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, &InitramfsError{Path: path, Err: fmt.Errorf("xz: %w", err)}
		}
		r = xr
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &InitramfsError{Path: path, Err: fmt.Errorf("gzip: %w", err)}
		}
		defer zr.Close()
		r = zr
	case bytes.Equal(magic, []byte("070701")):
		r = br
	default:
		return nil, &InitramfsError{Path: path, Err: errors.New("not an initramfs: neither xz, gzip nor a newc cpio archive")}
	}
	data, err := findInCpio(io.LimitReader(r, maxInitramfs), strings.TrimPrefix(plan.File, "/"), plan.MaxFileSize)
	if err != nil {
		return nil, &InitramfsError{Path: path, Err: err}
	}
	var pl plan.Plan
	if err := json.Unmarshal(data, &pl); err != nil {
		return nil, &InitramfsError{Path: path, Err: fmt.Errorf("%s is not a plan: %w", plan.File, err)}
	}
	return &pl, nil
}

// findInCpio reads newc cpio archives (several may follow each other,
// NUL-padded, as the kernel accepts) from r and returns the contents of
// the file called name (leading "/" or "./" ignored), at most max bytes.
func findInCpio(r io.Reader, name string, max int64) ([]byte, error) {
	br := bufio.NewReader(r)
	var hdr [110]byte
	for {
		// NUL padding between archives.
		for {
			b, err := br.Peek(1)
			if err == io.EOF {
				return nil, ErrNoPlan
			}
			if err != nil {
				return nil, err
			}
			if b[0] != 0 {
				break
			}
			br.ReadByte()
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, fmt.Errorf("cpio: header cut off: %w", err)
		}
		if m := string(hdr[:6]); m != "070701" && m != "070702" {
			return nil, fmt.Errorf("cpio: bad header magic %q: not a newc archive", m)
		}
		field := func(i int) (int64, error) {
			return strconv.ParseInt(string(hdr[6+8*i:14+8*i]), 16, 64)
		}
		size, err1 := field(6)
		nameSize, err2 := field(11)
		if err1 != nil || err2 != nil || nameSize < 1 || nameSize > 4096 {
			return nil, errors.New("cpio: damaged header")
		}
		nb := make([]byte, nameSize)
		if _, err := io.ReadFull(br, nb); err != nil {
			return nil, fmt.Errorf("cpio: name cut off: %w", err)
		}
		if err := skip(br, cpioPad(110+nameSize)); err != nil {
			return nil, err
		}
		got := strings.TrimPrefix(strings.TrimPrefix(string(bytes.TrimRight(nb, "\x00")), "./"), "/")
		if got == name {
			if size > max {
				return nil, fmt.Errorf("%s is %d bytes: not a plan", name, size)
			}
			data := make([]byte, size)
			if _, err := io.ReadFull(br, data); err != nil {
				return nil, fmt.Errorf("cpio: %s cut off: %w", name, err)
			}
			return data, nil
		}
		if err := skip(br, size+cpioPad(size)); err != nil {
			return nil, err
		}
	}
}

// cpioPad is how many bytes pad n to a multiple of 4.
func cpioPad(n int64) int64 { return pad4(n) - n }

func skip(r io.Reader, n int64) error {
	if got, err := io.CopyN(io.Discard, r, n); err != nil {
		return fmt.Errorf("cpio: archive cut off after %d of %d bytes: %w", got, n, err)
	}
	return nil
}

// ImageSite returns the site config built into a CF image's initramfs
// (nil, nil when the image has none: it does not route). ocfw run uses it
// to wire the QEMU ports the way the site uses them.
func ImageSite(image string) (*site.Site, error) {
	f, fi, err := regfile.Open(image)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := make([]byte, 512)
	if _, err := f.ReadAt(sec, 0); err != nil {
		return nil, err
	}
	rec, err := mbr.Parse(sec, uint64(fi.Size()/512))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", image, err)
	}
	for _, p := range rec.Partitions {
		if !p.Bootable {
			continue
		}
		fsys, err := fat.Open(f, int64(p.Start)*512, int64(p.Sectors)*512)
		if err != nil {
			return nil, fmt.Errorf("%s: boot partition: %w", image, err)
		}
		initrd, err := fsys.ReadFile(BootInitrd, 64<<20)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", image, err)
		}
		return initramfsSite(image+": "+BootInitrd, initrd)
	}
	return nil, fmt.Errorf("%s: no bootable partition", image)
}

// StandInSite is ImageSite for a stand-in image: the site config in the
// initramfs beside it (StandInSidecars), nil when it has none.
func StandInSite(image string) (*site.Site, error) {
	name := StandInSidecars(image).Initramfs
	initrd, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return initramfsSite(name, initrd)
}

// initramfsSite reads the site config from a (compressed) initramfs;
// where names it in errors.
func initramfsSite(where string, initrd []byte) (*site.Site, error) {
	r, err := decompressed(bytes.NewReader(initrd))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	data, err := findInCpio(io.LimitReader(r, maxInitramfs), strings.TrimPrefix(site.File, "/"), plan.MaxFileSize)
	if errors.Is(err, ErrNoPlan) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var s site.Site
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, site.File, err)
	}
	return &s, nil
}

// decompressed reads an initramfs as xz, gzip or a plain cpio.
func decompressed(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(6)
	switch {
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return xz.NewReader(br)
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		return gzip.NewReader(br)
	case bytes.Equal(magic, []byte("070701")):
		return br, nil
	}
	return nil, errors.New("neither xz, gzip nor a newc cpio archive")
}
