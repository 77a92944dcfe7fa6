package selftest

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ocfw/ocfw/drivers/catalog"
)

// The vector files cite the standard each vector comes from; the code only
// parses them, so a vector can be checked against its document by eye.
//
//go:embed vectors/*.txt
var vectorFS embed.FS

// Vector is one known-answer test.
type Vector struct {
	Cipher string
	ID     string // the standard and case, e.g. "RFC 3602 case 2"
	// Encrypt and Decrypt say which directions the vector checks.
	Encrypt, Decrypt bool
	Key, IV          []byte
	Plaintext        []byte
	Ciphertext       []byte
	Data, MAC        []byte // MACs: MAC may be truncated (RFC 2202/4231 case 5)
	// Full marks a vector only the full self-test runs (set = full): the
	// boot runs the rest, within its time budget.
	Full bool
	File string
	Line int
}

// Vectors returns every embedded vector, in file order. The files are
// parsed once per process: a self-test checks every engine and cipher
// against them, and the CAVP files alone are 400 KB.
func Vectors() ([]Vector, error) { return loadVectors() }

var loadVectors = sync.OnceValues(parseEmbedded)

func parseEmbedded() ([]Vector, error) {
	files, err := fs.Glob(vectorFS, "vectors/*.txt")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var all []Vector
	for _, f := range files {
		data, err := vectorFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		vs, err := ParseVectors(f, data)
		if err != nil {
			return nil, err
		}
		all = append(all, vs...)
	}
	return all, nil
}

// ParseVectors reads the vector file format: blank-line separated records
// of "field = value" lines, # comments. Values are hex, "text" in double
// quotes, or hh*N (byte hh repeated N times).
func ParseVectors(file string, data []byte) ([]Vector, error) {
	var out []Vector
	cur := map[string][]byte{}
	var raw map[string]string
	start := 0
	flush := func() error {
		if len(raw) == 0 {
			return nil
		}
		v, err := makeVector(raw, cur)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, start, err)
		}
		v.File, v.Line = file, start
		out = append(out, v)
		cur, raw = map[string][]byte{}, nil
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(text, "#") {
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"field = value\", got %q", file, line, text)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if raw == nil {
			raw, start = map[string]string{}, line
		}
		if _, dup := raw[k]; dup {
			return nil, fmt.Errorf("%s:%d: field %q given twice in one vector", file, line, k)
		}
		if !vectorFields[k] {
			return nil, fmt.Errorf("%s:%d: unknown field %q (want cipher, id, dir, set, key, iv, plaintext, ciphertext, data, mac)", file, line, k)
		}
		raw[k] = v
		switch k {
		case "cipher", "id", "dir", "set":
		default:
			b, err := decodeValue(v)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", file, line, k, err)
			}
			cur[k] = b
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

var vectorFields = map[string]bool{"cipher": true, "id": true, "dir": true, "set": true, "key": true, "iv": true, "plaintext": true, "ciphertext": true, "data": true, "mac": true}

func decodeValue(v string) ([]byte, error) {
	if strings.HasPrefix(v, `"`) {
		s, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("bad quoted text %s", v)
		}
		return []byte(s), nil
	}
	if b, n, ok := strings.Cut(v, "*"); ok {
		count, err := strconv.Atoi(n)
		one, herr := hex.DecodeString(b)
		if err != nil || herr != nil || len(one) != 1 || count < 0 || count > 1<<16 {
			return nil, fmt.Errorf("bad repetition %q: want hh*N, e.g. aa*80", v)
		}
		return bytes.Repeat(one, count), nil
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("bad hex %q", v)
	}
	return b, nil
}

func makeVector(raw map[string]string, vals map[string][]byte) (Vector, error) {
	v := Vector{Cipher: raw["cipher"], ID: raw["id"], Key: vals["key"], IV: vals["iv"],
		Plaintext: vals["plaintext"], Ciphertext: vals["ciphertext"], Data: vals["data"], MAC: vals["mac"]}
	c, ok := catalog.LookupCipher(v.Cipher)
	if !ok {
		return v, fmt.Errorf("unknown cipher %q", v.Cipher)
	}
	if v.ID == "" {
		return v, fmt.Errorf("vector without id: every vector names its source")
	}
	switch raw["set"] {
	case "", "boot":
	case "full":
		v.Full = true
	default:
		return v, fmt.Errorf("set %q: want boot (the default) or full", raw["set"])
	}
	switch c.Kind {
	case catalog.KindMAC:
		if v.Data == nil || len(v.MAC) == 0 || len(v.MAC) > c.DigestSize {
			return v, fmt.Errorf("%s vector %q needs data and a mac of at most %d bytes", c.Name, v.ID, c.DigestSize)
		}
	default:
		switch raw["dir"] {
		case "both":
			v.Encrypt, v.Decrypt = true, true
		case "encrypt":
			v.Encrypt = true
		case "decrypt":
			v.Decrypt = true
		default:
			return v, fmt.Errorf("dir %q: want encrypt, decrypt or both", raw["dir"])
		}
		if len(v.Key) != c.KeySize || len(v.IV) != c.IVSize || len(v.Plaintext) != len(v.Ciphertext) || len(v.Plaintext)%c.BlockSize != 0 {
			return v, fmt.Errorf("%s vector %q: key %d bytes (want %d), iv %d (want %d), plaintext %d and ciphertext %d (want equal multiples of %d)",
				c.Name, v.ID, len(v.Key), c.KeySize, len(v.IV), c.IVSize, len(v.Plaintext), len(v.Ciphertext), c.BlockSize)
		}
	}
	return v, nil
}
