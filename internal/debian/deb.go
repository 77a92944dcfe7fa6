// Package debian reads Debian binary packages (.deb) and fetches them with
// apt-get without root, for the kernel packages the firmware boots.
package debian

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// ErrFormat marks input that is not a well-formed .deb.
var ErrFormat = errors.New("not a valid Debian package")

const arMagic = "!<arch>\n"

// arHeaderLen is the fixed size of an ar member header.
const arHeaderLen = 60

// WalkData calls fn for every entry of the package's data archive
// (data.tar, data.tar.xz, .zst, .gz, .bz2 or .lzma) in archive order.
// Entry names are as stored (usually "./boot/..."); use CleanName to
// normalise them. fn may read the entry's contents from r; returning
// ErrStop ends the walk early without error.
func WalkData(deb io.Reader, fn func(h *tar.Header, r io.Reader) error) error {
	br := bufio.NewReader(deb)
	magic := make([]byte, len(arMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return fmt.Errorf("%w: reading ar signature: %v", ErrFormat, err)
	}
	if string(magic) != arMagic {
		return fmt.Errorf("%w: no ar signature (got %q)", ErrFormat, magic)
	}
	var hdr [arHeaderLen]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF {
				return fmt.Errorf("%w: no data.tar member", ErrFormat)
			}
			return fmt.Errorf("%w: truncated ar member header: %v", ErrFormat, err)
		}
		if hdr[58] != '`' || hdr[59] != '\n' {
			return fmt.Errorf("%w: bad ar member header", ErrFormat)
		}
		name := strings.TrimRight(string(hdr[0:16]), " ")
		name = strings.TrimSuffix(name, "/") // GNU ar style
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("%w: bad size in ar member %q", ErrFormat, name)
		}
		member := io.LimitReader(br, size)
		if strings.HasPrefix(name, "data.tar") {
			return walkTar(name, member, size, fn)
		}
		if n, err := io.Copy(io.Discard, member); err != nil || n != size {
			return fmt.Errorf("%w: ar member %q truncated (%d of %d bytes)", ErrFormat, name, n, size)
		}
		if size%2 == 1 { // members are 2-byte aligned
			if _, err := br.ReadByte(); err != nil {
				return fmt.Errorf("%w: truncated after ar member %q", ErrFormat, name)
			}
		}
	}
}

// ErrStop can be returned by a WalkData callback to end the walk early.
var ErrStop = errors.New("stop walking")

func walkTar(member string, r io.Reader, size int64, fn func(*tar.Header, io.Reader) error) error {
	cr := &countingReader{r: r}
	dec, closeDec, err := decompressor(member, cr)
	if err != nil {
		return err
	}
	defer closeDec()
	tr := tar.NewReader(dec)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v%s", ErrFormat, member, err, truncNote(cr.n, size))
		}
		if err := fn(h, tr); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			// Decompression errors surface through the entry reader.
			if isDecodeErr(err) {
				return fmt.Errorf("%w: %s: %s: %v%s", ErrFormat, member, h.Name, err, truncNote(cr.n, size))
			}
			return err
		}
	}
	// The member must be there in full: a short file is a truncated download.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, member, err)
	}
	if cr.n < size {
		return fmt.Errorf("%w: %s truncated%s", ErrFormat, member, truncNote(cr.n, size))
	}
	return nil
}

// decodeError wraps errors from the decompressor or tar reader so a
// callback's own errors (e.g. disk full) are not mistaken for bad input.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }
func (e decodeError) Unwrap() error { return e.err }

func isDecodeErr(err error) bool {
	var d decodeError
	return errors.As(err, &d) || errors.Is(err, io.ErrUnexpectedEOF)
}

type decodeReader struct{ r io.Reader }

func (d decodeReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF {
		err = decodeError{err}
	}
	return n, err
}

func truncNote(read, size int64) string {
	if read < size {
		return fmt.Sprintf(" (member truncated: %d of %d bytes)", read, size)
	}
	return ""
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func decompressor(member string, r io.Reader) (io.Reader, func(), error) {
	var (
		dec     io.Reader
		err     error
		closeFn = func() {}
	)
	switch {
	case member == "data.tar":
		dec = r
	case strings.HasSuffix(member, ".xz"):
		dec, err = xz.NewReader(r)
	case strings.HasSuffix(member, ".zst"):
		var z *zstd.Decoder
		// One goroutine and a bounded window: the input is untrusted.
		z, err = zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27))
		if err == nil {
			dec, closeFn = z, z.Close
		}
	case strings.HasSuffix(member, ".gz"):
		dec, err = gzip.NewReader(r)
	case strings.HasSuffix(member, ".bz2"):
		dec = bzip2.NewReader(r)
	case strings.HasSuffix(member, ".lzma"):
		// .lzma headers carry no magic: cap the dictionary a corrupt
		// header could ask for.
		dec, err = lzma.ReaderConfig{DictCap: 64 << 20}.NewReader(r)
	default:
		return nil, nil, fmt.Errorf("%w: unsupported data member %q", ErrFormat, member)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrFormat, member, err)
	}
	return decodeReader{dec}, closeFn, nil
}

// CleanName turns a tar entry name into a relative slash path without
// "./" prefix, or reports ok=false for names that would leave the
// extraction root (absolute after cleaning is allowed: "/boot" → "boot").
func CleanName(name string) (clean string, ok bool) {
	name = strings.TrimLeft(name, "/")
	for strings.HasPrefix(name, "./") {
		name = strings.TrimLeft(name[2:], "/")
	}
	if name == "" || name == "." {
		return "", false
	}
	if bytes.IndexByte([]byte(name), 0) >= 0 {
		return "", false
	}
	parts := strings.Split(strings.TrimSuffix(name, "/"), "/")
	out := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", false
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return "", false
	}
	return strings.Join(out, "/"), true
}
