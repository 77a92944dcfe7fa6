package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/ulikunitz/xz"

	"github.com/ocfw/ocfw/rootfs/usercache"
)

// The xz initramfs is one xz stream of two or more blocks: the first holds
// the archive's leading records that come from the userland alone (the
// busybox binary, its links, the base nodes: some 90% of the bytes), the
// rest the records a site config, card or kernel changes. An xz block is
// compressed on its own (its LZMA2 dictionary starts empty), so the
// first block, keyed by the sha256 of its bytes, comes from the userland
// cache when only the rest changed, and a cold build compresses both
// halves at once. The kernel's xz decoder and Go's readers see one stream
// and one cpio archive.

// xzConfig is how every part is compressed: CRC32 checks, which the
// kernel's decoder has (no CRC64 by default), an 8 MiB dictionary.
var xzConfig = xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 8 << 20}

// xzBlockKeyPrefix goes into the cache key of a compressed first block
// with the config; change it when the compression changes.
const xzBlockKeyPrefix = "ocfw initramfs xz block v1 crc32 dict 8MiB\n"

// xzBytes compresses data as one xz stream.
func xzBytes(ctx context.Context, data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := xzConfig.NewWriter(&b)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(w, ctxReader{ctx, bytes.NewReader(data)}); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// compressXZSplit writes raw's bytes to out as one xz stream whose first
// block is raw[:split], from cache when it holds it (nil: no cache).
func compressXZSplit(ctx context.Context, raw []byte, split int, out string, cache *usercache.Cache, tmp string, logf func(string, ...any)) error {
	if split <= 0 || split >= len(raw) {
		data, err := xzBytes(ctx, raw)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	}
	type result struct {
		data []byte
		err  error
	}
	restc := make(chan result, 1)
	go func() {
		d, err := xzBytes(ctx, raw[split:])
		restc <- result{d, err}
	}()
	h := sha256.New()
	h.Write([]byte(xzBlockKeyPrefix))
	h.Write(raw[:split])
	key := hex.EncodeToString(h.Sum(nil))
	var first []byte
	if cache != nil {
		f := filepath.Join(tmp, "first-block.xz")
		if hit, err := cache.Get(key, f); err != nil {
			logf("userland cache: %v", err)
		} else if hit {
			if first, err = os.ReadFile(f); err != nil {
				return err
			}
			if _, _, _, err := xzParts(first); err != nil {
				logf("userland cache: the compressed userland %.12s… does not read as xz (%v): compressing it anew", key, err)
				first = nil
			} else {
				logf("initramfs: the userland's xz block reused from cache (key %.12s…)", key)
			}
		}
	}
	if cache != nil && first == nil {
		// One compression of a key at a time, as for the userland.
		unlock, waited, err := cache.Building(ctx, key)
		if err == nil {
			defer unlock()
		}
		if waited && err == nil {
			f := filepath.Join(tmp, "first-block.xz")
			if hit, err := cache.Get(key, f); err == nil && hit {
				if b, err := os.ReadFile(f); err == nil {
					if _, _, _, err := xzParts(b); err == nil {
						first = b
						logf("initramfs: the userland's xz block reused from cache after another build made it (key %.12s…)", key)
					}
				}
			}
		}
	}
	stored := first != nil
	if first == nil {
		var err error
		if first, err = xzBytes(ctx, raw[:split]); err != nil {
			<-restc
			return err
		}
	}
	rest := <-restc
	if rest.err != nil {
		return rest.err
	}
	if cache != nil && !stored {
		f := filepath.Join(tmp, "first-block.xz")
		if err := os.WriteFile(f, first, 0o644); err != nil {
			return err
		}
		if err := cache.Put(key, f); err != nil {
			logf("userland cache: storing the compressed userland: %v", err)
		}
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := joinXZ(o, first, rest.data); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}

// xzParts splits a single xz stream into its stream flags, its blocks'
// bytes and its index records (unpadded size, uncompressed size).
func xzParts(s []byte) (flags []byte, blocks []byte, recs []uint64, err error) {
	if len(s) < 24 || !bytes.Equal(s[:6], xzMagic) || !bytes.Equal(s[len(s)-2:], []byte("YZ")) {
		return nil, nil, nil, errors.New("not a single xz stream")
	}
	flags = s[6:8]
	foot := s[len(s)-12:]
	if !bytes.Equal(foot[8:10], flags) || crc32.ChecksumIEEE(foot[4:10]) != binary.LittleEndian.Uint32(foot[:4]) {
		return nil, nil, nil, errors.New("xz stream footer does not match its header")
	}
	isize := (int(binary.LittleEndian.Uint32(foot[4:8])) + 1) * 4
	start := len(s) - 12 - isize
	if start < 12 {
		return nil, nil, nil, errors.New("xz index out of range")
	}
	idx := s[start : len(s)-12]
	if idx[0] != 0 || crc32.ChecksumIEEE(idx[:len(idx)-4]) != binary.LittleEndian.Uint32(idx[len(idx)-4:]) {
		return nil, nil, nil, errors.New("bad xz index")
	}
	r := bytes.NewReader(idx[1 : len(idx)-4])
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := uint64(0); i < 2*n; i++ {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("xz index: %w", err)
		}
		recs = append(recs, v)
	}
	return flags, s[12:start], recs, nil
}

// joinXZ writes the blocks of the xz streams, in order, as one stream.
func joinXZ(w io.Writer, streams ...[]byte) error {
	var flags, blocks []byte
	var recs []uint64
	for i, s := range streams {
		f, b, r, err := xzParts(s)
		if err != nil {
			return err
		}
		if i == 0 {
			flags = f
		} else if !bytes.Equal(f, flags) {
			return errors.New("xz streams with different checks")
		}
		blocks = append(blocks, b...)
		recs = append(recs, r...)
	}
	var out bytes.Buffer
	out.Write(streams[0][:12]) // the stream header: magic, flags, CRC32
	out.Write(blocks)
	idx := []byte{0}
	idx = binary.AppendUvarint(idx, uint64(len(recs)/2))
	for _, v := range recs {
		idx = binary.AppendUvarint(idx, v)
	}
	for len(idx)%4 != 0 {
		idx = append(idx, 0)
	}
	idx = binary.LittleEndian.AppendUint32(idx, crc32.ChecksumIEEE(idx))
	out.Write(idx)
	foot := binary.LittleEndian.AppendUint32(nil, uint32(len(idx)/4-1))
	foot = append(foot, flags...)
	out.Write(binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(foot)))
	out.Write(foot)
	out.WriteString("YZ")
	_, err := w.Write(out.Bytes())
	return err
}

// compressInitramfsXZ compresses the raw archive for the kernel, its
// first split bytes as a block of their own, cached unless noCache.
func compressInitramfsXZ(ctx context.Context, raw string, split int64, out, tmp string, noCache bool, logf func(string, ...any)) error {
	data, err := os.ReadFile(raw)
	if err != nil {
		return err
	}
	var cache *usercache.Cache
	if !noCache {
		if cache, err = usercache.Default(); err != nil {
			logf("userland cache: %v", err)
			cache = nil
		} else {
			cache.Log = logf
		}
	}
	return compressXZSplit(ctx, data, int(split), out, cache, tmp, logf)
}
