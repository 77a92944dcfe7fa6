package afalg

import (
	"embed"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/ocf"
)

// The samples are embedded so that the test binary carries them into the
// QEMU guest, which has no source tree.
//
//go:embed testdata/*.txt
var samples embed.FS

func readSample(t *testing.T, name string) []Entry {
	t.Helper()
	f, err := samples.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := ParseProcCrypto(f)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func TestParseProcCryptoHifn(t *testing.T) {
	entries := readSample(t, "proc-crypto-alix-hifn.txt")
	if len(entries) != 18 {
		t.Fatalf("parsed %d entries, want 18", len(entries))
	}
	want := Entry{
		Name: "cbc(aes)", Driver: "cbc-aes-hifn0", Module: "hifn_795x", Priority: 300, Refcnt: 1,
		SelfTest: "passed", Type: "skcipher", Async: true, BlockSize: 16, MinKeySize: 16, MaxKeySize: 32,
		IVSize: 16, Other: map[string]string{"chunksize": "16", "walksize": "16"},
	}
	if got := entries[3]; !reflect.DeepEqual(got, want) {
		t.Errorf("entry 3 =\n%+v\nwant\n%+v", got, want)
	}
	hmac := Entry{Name: "hmac(sha1)", Driver: "hmac(sha1-generic)", Module: "kernel", Priority: 100, Refcnt: 1,
		SelfTest: "passed", Type: "shash", BlockSize: 64, DigestSize: 20}
	if got := entries[13]; !reflect.DeepEqual(got, hmac) {
		t.Errorf("entry 13 =\n%+v\nwant\n%+v", got, hmac)
	}
	if e := entries[7]; e.Type != "cipher" || e.Async || e.IVSize != 0 || e.Driver != "geode-aes" {
		t.Errorf("entry 7 = %+v, want the geode-aes single-block cipher", e)
	}
}

func TestParseProcCryptoOdd(t *testing.T) {
	entries := readSample(t, "proc-crypto-odd.txt")
	if len(entries) != 9 {
		t.Fatalf("parsed %d entries, want 9 (no trailing blank line)", len(entries))
	}
	if e := entries[0]; e.SelfTest != "unknown" || e.Tested() {
		t.Errorf("entry 0 selftest %q Tested %v, want unknown/false", e.SelfTest, e.Tested())
	}
	if !entries[1].Internal || entries[3].Internal {
		t.Errorf("internal flags wrong: %v %v", entries[1].Internal, entries[3].Internal)
	}
	if e := entries[5]; e.Type != "ablkcipher" || e.Other["geniv"] != "<default>" {
		t.Errorf("entry 5 = %+v, want ablkcipher with geniv kept in Other", e)
	}
	if e := entries[8]; e.Type != "rng" || e.Other["seedsize"] != "0" {
		t.Errorf("last entry = %+v, want the rng with seedsize", e)
	}
}

func TestParseProcCryptoErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"no colon", "name : a\ndriver a-generic\n", "line 2"},
		{"field before name", "driver : x\n", `before any "name"`},
		{"bad number", "name : a\npriority : high\n", `line 2 (a): priority: "high" is not a number`},
		{"bad yes/no", "name : a\nasync : maybe\n", "neither yes nor no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProcCrypto(strings.NewReader(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	hifn := readSample(t, "proc-crypto-alix-hifn.txt")
	odd := readSample(t, "proc-crypto-odd.txt")
	tests := []struct {
		name       string
		entries    []Entry
		sock, bind string
		want       string // driver, "" for none
	}{
		{"generic picks the highest priority", hifn, "skcipher", "cbc(aes)", "cbc-aes-geode"},
		{"driver name pins the Hifn", hifn, "skcipher", "cbc-aes-hifn0", "cbc-aes-hifn0"},
		{"driver name pins generic code", hifn, "skcipher", "cbc(aes-generic)", "cbc(aes-generic)"},
		{"des goes to the Hifn over generic", hifn, "skcipher", "cbc(des)", "cbc-des-hifn0"},
		{"single-block cipher is not a skcipher", hifn, "skcipher", "aes", ""},
		{"skcipher is not a hash", hifn, "hash", "cbc(aes)", ""},
		{"hash by generic name", hifn, "hash", "hmac(sha1)", "hmac(sha1-generic)"},
		{"absent", hifn, "hash", "hmac(sha256)", ""},
		{"untested, internal skipped; tie goes to first listed", odd, "skcipher", "cbc(aes)", "cbc-aes-small"},
		{"untested driver is not handed out", odd, "skcipher", "cbc-aes-fancy", ""},
		{"internal driver is not handed out", odd, "skcipher", "cbc-aes-internal", ""},
		{"old ablkcipher type", odd, "skcipher", "cbc(des)", "cbc-des-old"},
		{"shash outranks ahash by priority", odd, "hash", "hmac(sha256)", "hmac(sha256-generic)"},
		{"ahash by driver", odd, "hash", "hmac(sha256-async)", "hmac(sha256-async)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := Resolve(tt.entries, tt.sock, tt.bind)
			if got := e.Driver; ok != (tt.want != "") || got != tt.want {
				t.Errorf("Resolve(%s, %s) = %q, %v; want %q", tt.sock, tt.bind, got, ok, tt.want)
			}
		})
	}
}

func TestImplementations(t *testing.T) {
	var got []string
	for _, e := range Implementations(readSample(t, "proc-crypto-alix-hifn.txt"), "skcipher", "cbc(aes)") {
		got = append(got, e.Driver)
	}
	want := []string{"cbc-aes-hifn0", "cbc-aes-geode", "cbc(aes-generic)"}
	if !slices.Equal(got, want) {
		t.Errorf("implementations of cbc(aes) = %v, want %v", got, want)
	}
}

func TestCapsFor(t *testing.T) {
	hifn := readSample(t, "proc-crypto-alix-hifn.txt")
	odd := readSample(t, "proc-crypto-odd.txt")
	find := func(entries []Entry, driver string) *Entry {
		for i := range entries {
			if entries[i].Driver == driver {
				return &entries[i]
			}
		}
		t.Fatalf("no %s in sample", driver)
		return nil
	}
	tests := []struct {
		entries []Entry
		driver  string
		want    map[string][]int
	}{
		{hifn, "cbc-aes-geode", map[string][]int{"aes-128-cbc": {16}, "aes-192-cbc": {24}, "aes-256-cbc": {32}}},
		{hifn, "cbc-3des-hifn0", map[string][]int{"des-ede3-cbc": {24}}},
		{hifn, "ecb-aes-hifn0", map[string][]int{}},
		{hifn, "geode-aes", map[string][]int{}},
		{hifn, "hmac(sha1-generic)", map[string][]int{"hmac-sha1": {}}},
		{hifn, "ecb-cipher_null", map[string][]int{"null": {}}},
		{odd, "cbc-aes-small", map[string][]int{"aes-128-cbc": {16}}},
	}
	for _, tt := range tests {
		t.Run(tt.driver, func(t *testing.T) {
			if got := capsFor(find(tt.entries, tt.driver)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("capsFor = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBindErrorMessages(t *testing.T) {
	hifn := readSample(t, "proc-crypto-alix-hifn.txt")
	odd := readSample(t, "proc-crypto-odd.txt")
	tests := []struct {
		name, sock, bind string
		entries          []Entry
		errno            unix.Errno
		want             string
		kind             error
	}{
		{"missing hardware module", "skcipher", "cbc-aes-hifn0", nil, unix.ENOENT,
			"afalg: bind skcipher cbc-aes-hifn0: no such algorithm or driver (ENOENT): is hifn_795x loaded? (and algif_skcipher)", ocf.ErrUnsupported},
		{"listed but algif missing", "skcipher", "cbc-aes-hifn0", hifn, unix.ENOENT,
			"afalg: bind skcipher cbc-aes-hifn0: no such algorithm or driver (ENOENT): cbc-aes-hifn0 is listed: is algif_skcipher loaded?", ocf.ErrUnsupported},
		{"listed but untested", "skcipher", "cbc-aes-fancy", odd, unix.ENOENT,
			"cbc-aes-fancy is listed but has not passed its self-test", ocf.ErrUnsupported},
		{"unknown module", "hash", "hmac(whirlpool)", nil, unix.ENOENT,
			"is the module providing it loaded? (and algif_hash)", ocf.ErrUnsupported},
		{"failed self-test", "skcipher", "cbc(aes)", nil, unix.ELIBBAD,
			"afalg: bind skcipher cbc(aes): implementation failed its self-test (ELIBBAD)", ocf.ErrUnsupported},
		{"other errno", "skcipher", "cbc(aes)", nil, unix.ENOMEM,
			"afalg: bind skcipher cbc(aes): cannot allocate memory (ENOMEM)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := bindErr(tt.sock, tt.bind, tt.errno, tt.entries)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !errors.Is(err, tt.errno) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errno)
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.kind)
			}
		})
	}
}
