package afalg

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ProcCrypto is where the kernel lists its crypto implementations.
const ProcCrypto = "/proc/crypto"

// Entry is one implementation listed in /proc/crypto. Fields the kernel
// prints only for some types are zero when absent.
type Entry struct {
	Name     string // generic name, e.g. "cbc(aes)"
	Driver   string // implementation name, e.g. "cbc-aes-geode"
	Module   string // "kernel" when built in
	Priority int
	Refcnt   int
	// SelfTest is "passed" or "unknown". "passed" does not prove a test
	// ran: the kernel also prints it when tests are compiled out or no
	// vector exists.
	SelfTest   string
	Internal   bool // only reachable from inside the kernel, never bound by AF_ALG
	Type       string
	Async      bool
	BlockSize  int
	MinKeySize int
	MaxKeySize int
	IVSize     int
	DigestSize int
	// Other holds the lines this parser has no field for (chunksize,
	// geniv, ...), keyed as the kernel prints them.
	Other map[string]string
}

// Tested reports whether the kernel marked the implementation as having
// passed its self-test; the kernel only hands out tested implementations.
func (e *Entry) Tested() bool { return e.SelfTest == "passed" }

// ParseProcCrypto reads /proc/crypto text: blocks of "key : value" lines
// separated by blank lines.
func ParseProcCrypto(r io.Reader) ([]Entry, error) {
	var (
		out  []Entry
		cur  *Entry
		line int
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			cur = nil
			continue
		}
		key, val, ok := strings.Cut(text, ":")
		if !ok {
			return nil, fmt.Errorf("proc crypto line %d: %q has no ':'", line, text)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "name" {
			out = append(out, Entry{Name: val})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("proc crypto line %d: %q before any \"name\" line", line, text)
		}
		if err := cur.set(key, val); err != nil {
			return nil, fmt.Errorf("proc crypto line %d (%s): %w", line, cur.Name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("proc crypto: %w", err)
	}
	return out, nil
}

func (e *Entry) set(key, val string) error {
	num := func(p *int) error {
		n, err := strconv.Atoi(val)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", key, val)
		}
		*p = n
		return nil
	}
	yes := func(p *bool) error {
		switch val {
		case "yes":
			*p = true
		case "no":
			*p = false
		default:
			return fmt.Errorf("%s: %q is neither yes nor no", key, val)
		}
		return nil
	}
	switch key {
	case "driver":
		e.Driver = val
	case "module":
		e.Module = val
	case "priority":
		return num(&e.Priority)
	case "refcnt":
		return num(&e.Refcnt)
	case "selftest":
		e.SelfTest = val
	case "internal":
		return yes(&e.Internal)
	case "type":
		e.Type = val
	case "async":
		return yes(&e.Async)
	case "blocksize":
		return num(&e.BlockSize)
	case "min keysize":
		return num(&e.MinKeySize)
	case "max keysize":
		return num(&e.MaxKeySize)
	case "ivsize":
		return num(&e.IVSize)
	case "digestsize":
		return num(&e.DigestSize)
	default:
		if e.Other == nil {
			e.Other = make(map[string]string)
		}
		e.Other[key] = val
	}
	return nil
}

// ReadProcCrypto parses the file at path (ProcCrypto when empty).
func ReadProcCrypto(path string) ([]Entry, error) {
	if path == "" {
		path = ProcCrypto
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProcCrypto(f)
}

// typeMatches reports whether an entry of /proc/crypto type t can serve an
// AF_ALG socket of type sock ("skcipher" or "hash"). Older kernels list
// skciphers as (a)blkcipher or givcipher; newer ones add lskcipher, which
// the skcipher API wraps.
func typeMatches(sock, t string) bool {
	switch sock {
	case "skcipher":
		switch t {
		case "skcipher", "lskcipher", "ablkcipher", "blkcipher", "givcipher":
			return true
		}
	case "hash":
		return t == "shash" || t == "ahash"
	}
	return false
}

// Resolve returns the entry the kernel would pick when an AF_ALG socket of
// type sock binds name, mirroring the kernel's lookup: an exact driver
// name wins; otherwise the highest priority among entries with that
// generic name, the first listed on a tie (the kernel lists the most
// recently registered first and keeps the first of equal priority).
// Internal and untested entries are never picked.
func Resolve(entries []Entry, sock, name string) (Entry, bool) {
	best := -1
	for i := range entries {
		e := &entries[i]
		if e.Internal || !e.Tested() || !typeMatches(sock, e.Type) {
			continue
		}
		if e.Driver == name {
			return *e, true
		}
		if e.Name == name && (best < 0 || e.Priority > entries[best].Priority) {
			best = i
		}
	}
	if best < 0 {
		return Entry{}, false
	}
	return entries[best], true
}

// Implementations lists the entries (tested or not) that could serve name
// for socket type sock, by generic or driver name, in /proc/crypto order:
// what a test iterates over to exercise every engine.
func Implementations(entries []Entry, sock, name string) []Entry {
	var out []Entry
	for _, e := range entries {
		if !e.Internal && typeMatches(sock, e.Type) && (e.Name == name || e.Driver == name) {
			out = append(out, e)
		}
	}
	return out
}
