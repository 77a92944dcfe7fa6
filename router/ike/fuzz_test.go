package ike

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecode: any datagram either decodes or fails with a *ParseError, never
// panics; what decodes re-encodes to a message that decodes to the same
// bytes again.
func FuzzDecode(f *testing.F) {
	f.Add(unhex(f, initRequest))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		out, err := m.Encode()
		if err != nil {
			return // e.g. an SA payload the encoder will not write; decoding was still safe
		}
		m2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		out2, err := m2.Encode()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encode(decode(encode(m))) differs: %v", err)
		}
	})
}

// fuzzKeys are fixed keys for FuzzOpen: AES-128-CBC, HMAC-SHA2-256-128.
var fuzzEncrKey, fuzzIntegKey = bytes.Repeat([]byte{0x11}, 16), bytes.Repeat([]byte{0x22}, 32)

// FuzzOpen drives the SK payload's decryption past the ICV: the input is the
// first inner payload type and a plaintext (payloads, padding, pad length);
// the harness encrypts it and computes a valid ICV, so Open's padding and
// inner parsing see arbitrary bytes.
func FuzzOpen(f *testing.F) {
	f.Add(byte(PayloadNotify), unhex(f, "00 00 0008 00 00 4000 0000000000000007"))
	s := testSuite(f, ENCR_AES_CBC, 128, AUTH_HMAC_SHA2_256_128)
	c, err := NewSKCipher(s, fuzzEncrKey, fuzzIntegKey)
	if err != nil {
		f.Fatal(err)
	}
	blk, _ := aes.NewCipher(fuzzEncrKey)
	f.Fuzz(func(t *testing.T, first byte, pt []byte) {
		if len(pt) > MaxMessage/2 {
			return
		}
		pt = pt[:len(pt)/16*16]
		data := make([]byte, 16+len(pt))
		cipher.NewCBCEncrypter(blk, data[:16]).CryptBlocks(data[16:], pt)
		pkt := sealRaw(t, s, nil, fuzzIntegKey, PayloadType(first), data)
		m, err := Decode(pkt)
		if err != nil {
			t.Fatalf("harness packet does not decode: %v", err)
		}
		ps, err := c.Open(pkt, m)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if len(ps) > MaxPayloads {
			t.Fatalf("%d payloads", len(ps))
		}
	})
}

// allocBound is what decoding one datagram may allocate in all: a few
// times the packet plus the payload bookkeeping of MaxPayloads payloads.
func allocBound(n int) uint64 { return uint64(8*n + 32<<10) }

// TestDecodeAllocationsBounded runs the seed corpus and the worst cases
// for bookkeeping (most payloads, most SPIs, most selectors per byte)
// through Decode and measures the bytes it allocates.
func TestDecodeAllocationsBounded(t *testing.T) {
	inputs := [][]byte{unhex(t, initRequest)}
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecode/*")
	if len(files) == 0 {
		t.Fatal("no seed corpus in testdata/fuzz/FuzzDecode")
	}
	for _, f := range files {
		inputs = append(inputs, readSeed(t, f))
	}
	// 64 empty Vendor IDs; a Delete with 1024 four-byte SPIs; TS with 64
	// selectors.
	vendors := &Message{Header: Header{Version: Version, Exchange: INFORMATIONAL}}
	for range MaxPayloads {
		vendors.Payloads = append(vendors.Payloads, &VendorID{})
	}
	del := &Delete{Protocol: ProtoESP, SPISize: 4}
	for range maxDeleteSPIs {
		del.SPIs = append(del.SPIs, []byte{1, 2, 3, 4})
	}
	var sel Selectors
	for range maxSelectors {
		sel = append(sel, TrafficSelector{Start: mustAddrPort(t, "10.0.0.1:0").Addr(), End: mustAddrPort(t, "10.0.0.2:0").Addr()})
	}
	for _, m := range []*Message{vendors,
		{Header: Header{Version: Version, Exchange: INFORMATIONAL}, Payloads: []Payload{del}},
		{Header: Header{Version: Version, Exchange: CREATE_CHILD_SA}, Payloads: []Payload{&TSi{sel}, &TSr{sel}}}} {
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(b); err != nil {
			t.Fatalf("worst case does not decode: %v", err)
		}
		inputs = append(inputs, b)
	}
	for _, b := range inputs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			Decode(b)
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / 10
		t.Logf("%d bytes: %d bytes allocated per decode", len(b), per)
		if per > allocBound(len(b)) {
			t.Errorf("decoding %d bytes allocates %d bytes, bound %d", len(b), per, allocBound(len(b)))
		}
	}
}

// readSeed reads a one-value corpus file: "go test fuzz v1" then []byte("...").
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, lit, ok := strings.Cut(strings.TrimSpace(string(text)), "\n[]byte(")
	if !ok || !strings.HasSuffix(lit, ")") {
		t.Fatalf("%s: not a []byte corpus entry", path)
	}
	b, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(b)
}

// TestSeedCorpus checks the seeds are what their names say, so the fuzz
// targets start from valid messages as well as broken ones.
func TestSeedCorpus(t *testing.T) {
	for name, wantOK := range map[string]bool{
		"init_request": true, "auth_plain": true, "sk_payload": true, "sa_two_proposals": true,
		"critical_unknown": false, "truncated": false,
	} {
		b := readSeed(t, filepath.Join("testdata/fuzz/FuzzDecode", name))
		m, err := Decode(b)
		if (err == nil) != wantOK {
			t.Errorf("%s: decode error %v, want ok=%v", name, err, wantOK)
			continue
		}
		if err != nil {
			continue
		}
		if out, err := m.Encode(); err != nil || !bytes.Equal(out, b) {
			t.Errorf("%s: encode(decode(x)) != x: %v", name, err)
		}
	}
}
