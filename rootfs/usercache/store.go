package usercache

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/atomicfile"
	"github.com/ocfw/ocfw/internal/debian"
)

// DefaultMaxBytes bounds the store: some 50 userlands of 10 to 20 MB.
const DefaultMaxBytes = 1 << 30

// entryExt names the entries; anything else in the directory (the lock,
// temporary files) is not one.
const entryExt = ".entry"

// buildingExt names the build locks (Building), one per key.
const buildingExt = ".building"

// header starts every entry: the format, then the size and sha256 of the
// bytes after the header line.
const header = "ocfw-userland-entry"

// Cache is a directory of userland entries.
type Cache struct {
	// Dir holds the entries and the lock file; made when needed.
	Dir string
	// MaxBytes bounds the entries' total size; 0 means DefaultMaxBytes.
	// Inserting evicts the least recently used entries over it (never the
	// one just inserted).
	MaxBytes int64
	// Log, when set, gets a line for each entry found corrupt and each
	// eviction.
	Log func(format string, args ...any)
}

// DefaultDir is userland/ in the ocfw cache directory
// (debian.DefaultCacheDir: $OCFW_CACHE, $XDG_CACHE_HOME/ocfw or
// ~/.cache/ocfw).
func DefaultDir() (string, error) {
	d, err := debian.DefaultCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "userland"), nil
}

// Default is the cache in DefaultDir with the default bound.
func Default() (*Cache, error) {
	d, err := DefaultDir()
	if err != nil {
		return nil, err
	}
	return &Cache{Dir: d}, nil
}

func (c *Cache) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

func (c *Cache) path(key string) (string, error) {
	if len(key) != sha256.Size*2 {
		return "", fmt.Errorf("usercache: key %q is not a hex sha256", key)
	}
	if _, err := hex.DecodeString(key); err != nil {
		return "", fmt.Errorf("usercache: key %q is not a hex sha256", key)
	}
	return filepath.Join(c.Dir, key+entryExt), nil
}

// lock takes the directory's lock, waiting for other processes and
// goroutines, and returns how to release it.
func (c *Cache) lock() (func(), error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("usercache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("usercache: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("usercache: locking %s: %w", f.Name(), err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// Building takes key's build lock, for a build about to make the entry
// for key after a miss: while another build (in this process or
// another: go test runs packages side by side, and each may start with
// the same cold userland) holds it, Building waits, until ctx ends, and
// says it waited; the caller then looks again, and finds the entry the
// other build stored instead of compiling the same bytes beside it. The
// lock is a file .KEY.building in Dir, left for the next build. unlock
// releases it; call it once the entry is stored or the build failed.
func (c *Cache) Building(ctx context.Context, key string) (unlock func(), waited bool, err error) {
	if _, err := c.path(key); err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("usercache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, "."+key+buildingExt), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("usercache: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, waited, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, waited, fmt.Errorf("usercache: locking %s: %w", f.Name(), err)
		}
		if !waited {
			c.logf("userland cache: another build is making %.12s…; waiting for it", key)
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, waited, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Get copies the entry for key to dst and reports whether there was one.
// An entry whose size or sha256 does not match its header is removed (and
// logged), dst too, and Get reports a miss; a hit marks the entry used.
func (c *Cache) Get(key, dst string) (bool, error) {
	p, err := c.path(key)
	if err != nil {
		return false, err
	}
	unlock, err := c.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("usercache: %w", err)
	}
	defer f.Close()
	bad := func(why string) (bool, error) {
		c.logf("userland cache: entry %.12s… is corrupt (%s): removed, building the userland anew", key, why)
		f.Close()
		os.Remove(dst)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("usercache: removing corrupt entry: %w", err)
		}
		return false, nil
	}
	br := bufio.NewReader(f)
	line, err := br.ReadString('\n')
	if err != nil {
		return bad("no header")
	}
	size, want, ok := parseHeader(line)
	if !ok {
		return bad("bad header")
	}
	o, err := os.Create(dst)
	if err != nil {
		return false, fmt.Errorf("usercache: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(o, h), io.LimitReader(br, size+1))
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return false, fmt.Errorf("usercache: reading entry %s: %w", p, err)
	}
	if n != size {
		return bad(fmt.Sprintf("%d bytes, its header says %d", n, size))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return bad(fmt.Sprintf("sha256 %.12s…, its header says %.12s…", got, want))
	}
	now := time.Now()
	if err := os.Chtimes(p, now, now); err != nil {
		return false, fmt.Errorf("usercache: %w", err)
	}
	return true, nil
}

func parseHeader(line string) (size int64, sum string, ok bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != header || f[1] != strconv.Itoa(FormatVersion) || len(f[3]) != sha256.Size*2 {
		return 0, "", false
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return 0, "", false
	}
	return size, f[3], true
}

// Put stores the file src as the entry for key (replacing any), then
// evicts the least recently used entries over MaxBytes. The entry is
// written under a temporary name and renamed: a reader sees the whole
// entry or none.
func (c *Cache) Put(key, src string) error {
	p, err := c.path(key)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	size, err := io.Copy(h, in)
	if err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var set atomicfile.Set
	defer set.Cleanup()
	f, err := set.Create(p)
	if err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	bw := bufio.NewWriter(f)
	fmt.Fprintf(bw, "%s %d %d %s\n", header, FormatVersion, size, hex.EncodeToString(h.Sum(nil)))
	n, err := io.Copy(bw, in)
	if err == nil && n != size {
		err = fmt.Errorf("%s changed while it was stored (%d bytes, then %d)", src, size, n)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	if err := set.Commit(0o644); err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	return c.evict(p)
}

// evict removes the least recently used entries until the rest fit in
// MaxBytes, keeping keep, and temporary files a crashed insert left an
// hour or more ago. The caller holds the lock.
func (c *Cache) evict(keep string) error {
	limit := c.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	des, err := os.ReadDir(c.Dir)
	if err != nil {
		return fmt.Errorf("usercache: %w", err)
	}
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var entries []entry
	var total int64
	for _, de := range des {
		info, err := de.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		p := filepath.Join(c.Dir, de.Name())
		if strings.HasPrefix(de.Name(), ".") && strings.Contains(de.Name(), ".tmp-") {
			if time.Since(info.ModTime()) > time.Hour {
				os.Remove(p)
			}
			continue
		}
		if !strings.HasSuffix(de.Name(), entryExt) {
			continue
		}
		entries = append(entries, entry{p, info.Size(), info.ModTime()})
		total += info.Size()
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].used.Before(entries[j].used) })
	for _, e := range entries {
		if total <= limit {
			break
		}
		if e.path == keep {
			continue
		}
		if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("usercache: %w", err)
		}
		total -= e.size
		c.logf("userland cache: evicted %s (%d KiB, last used %s) to stay under %d MiB", filepath.Base(e.path), e.size/1024, e.used.Format(time.RFC3339), limit>>20)
	}
	return nil
}
