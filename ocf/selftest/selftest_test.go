package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/ocftest"
	"github.com/ocfw/ocfw/ocf/soft"
)

// TestVectorsAgreeWithStdlib checks the transcribed vectors against Go's
// standard library, independently of ocf: a typo in a vector file fails
// here, not as a "broken engine" on a board.
func TestVectorsAgreeWithStdlib(t *testing.T) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	perFile := map[string]int{}
	for _, v := range vs {
		count[v.Cipher]++
		if f, _, ok := strings.Cut(strings.TrimPrefix(v.ID, "CAVP "), " "); ok && strings.HasPrefix(v.ID, "CAVP ") {
			perFile[f]++
		}
		c, err := ocf.LookupCipher(v.Cipher)
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind == catalog.KindMAC {
			got, err := ocftest.Reference(c, v.Key, ocf.Request{Op: ocf.MAC, Src: v.Data})
			if err != nil {
				t.Fatal(err)
			}
			if got = got[:min(len(v.MAC), len(got))]; !bytes.Equal(got, v.MAC) {
				t.Errorf("%s:%d %s: stdlib gives %x, file says %x", v.File, v.Line, v.ID, got, v.MAC)
			}
			continue
		}
		// Both directions, whichever the vector is for: a typo in either
		// text fails one of them.
		got, err := ocftest.Reference(c, v.Key, ocf.Request{Op: ocf.Encrypt, IV: v.IV, Src: v.Plaintext})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v.Ciphertext) {
			t.Errorf("%s:%d %s: stdlib gives %x, file says %x", v.File, v.Line, v.ID, got, v.Ciphertext)
		}
		got, err = ocftest.Reference(c, v.Key, ocf.Request{Op: ocf.Decrypt, IV: v.IV, Src: v.Ciphertext})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v.Plaintext) {
			t.Errorf("%s:%d %s: stdlib decrypts to %x, file says %x", v.File, v.Line, v.ID, got, v.Plaintext)
		}
	}
	// The published vectors the files must hold, per cipher: SP 800-38A
	// F.2.1-F.2.6 (3 records, both ways) and RFC 3602 1-4; FIPS 81; TDEA;
	// RFC 2202 1-7 twice; RFC 4231 1-7; and the CAVP files below.
	want := map[string]int{"aes-128-cbc": 5 + 304, "aes-192-cbc": 1 + 370, "aes-256-cbc": 1 + 425, "des-cbc": 1, "des-ede3-cbc": 4 + 295, "hmac-md5": 7, "hmac-sha1": 7, "hmac-sha256": 7}
	for c, n := range want {
		if count[c] != n {
			t.Errorf("%s: %d vectors, want %d", c, count[c], n)
		}
	}
	// Every record of each CAVP response file (a KAT file's DECRYPT
	// section repeats its ENCRYPT one and is folded into dir = both).
	wantFile := map[string]int{
		"CBCGFSbox128.rsp": 7, "CBCKeySbox128.rsp": 21, "CBCVarTxt128.rsp": 128, "CBCVarKey128.rsp": 128, "CBCMMT128.rsp": 20,
		"CBCGFSbox192.rsp": 6, "CBCKeySbox192.rsp": 24, "CBCVarTxt192.rsp": 128, "CBCVarKey192.rsp": 192, "CBCMMT192.rsp": 20,
		"CBCGFSbox256.rsp": 5, "CBCKeySbox256.rsp": 16, "CBCVarTxt256.rsp": 128, "CBCVarKey256.rsp": 256, "CBCMMT256.rsp": 20,
		"TCBCvartext.rsp": 64, "TCBCinvperm.rsp": 64, "TCBCvarkey.rsp": 56, "TCBCpermop.rsp": 32, "TCBCsubtab.rsp": 19,
		"TCBCMMT1.rsp": 20, "TCBCMMT2.rsp": 20, "TCBCMMT3.rsp": 20,
	}
	for f, n := range wantFile {
		if perFile[f] != n {
			t.Errorf("%s: %d vectors, want %d", f, perFile[f], n)
		}
	}
	if len(perFile) != len(wantFile) {
		t.Errorf("CAVP files %v, want those of %v", perFile, wantFile)
	}
}

// TestBootSubset checks the boot's known answers are a small subset of the
// full set: every cipher keeps some, and the CAVP files give one each.
func TestBootSubset(t *testing.T) {
	for _, tc := range []struct {
		cipher     string
		boot, full int
	}{
		// SP 800-38A and RFC 3602 1-4 (both ways), then COUNT 0 of the four
		// KAT files (both ways) and of MMT's two sections.
		{"aes-128-cbc", 2 + 8 + 4*2 + 2, 2 + 8 + 2*284 + 20},
		// FIPS 81 is des-cbc's; SP 800-20 and 800-67 (4 both ways), COUNT 0
		// of five KAT files (both ways) and of MMT1-3's two sections.
		{"des-ede3-cbc", 8 + 5*2 + 3*2, 8 + 2*235 + 60},
		{"hmac-sha256", 7, 7},
	} {
		boot := Check(soft.New(), tc.cipher, Options{Sizes: []int{}})
		full := Check(soft.New(), tc.cipher, Options{Sizes: []int{}, Full: true})
		if boot.Status != Pass || full.Status != Pass {
			t.Fatalf("%s: boot %s %v, full %s %v", tc.cipher, boot.Status, boot.Failure, full.Status, full.Failure)
		}
		if boot.KATs != tc.boot || full.KATs != tc.full {
			t.Errorf("%s: %d known answers at boot, %d full; want %d, %d", tc.cipher, boot.KATs, full.KATs, tc.boot, tc.full)
		}
	}
}

func TestParseVectorErrors(t *testing.T) {
	cases := map[string]string{
		"cipher = aes-128-cbc\nid = x\ndir = both\nkey = 00\n":                   "key 1 bytes (want 16)",
		"cipher = rot13\nid = x\n":                                               `unknown cipher "rot13"`,
		"cipher = hmac-md5\nkey = 00\ndata = 00\nmac = 00\n":                     "vector without id",
		"cipher = hmac-md5\nid = x\nkey = zz\n":                                  "bad hex",
		"cipher = hmac-md5\nid = x\nkey = aa*x\n":                                "bad repetition",
		"cipher = hmac-md5\nid = x\nid = y\n":                                    "given twice",
		"garbage\n":                                                              `want "field = value"`,
		"cipher = hmac-md5\nid = x\nkey = 00\ndata = 00\nmac = 00\ncolour = 1\n": `unknown field "colour"`,
		"cipher = aes-128-cbc\nid = x\ndir = sideways\n":                         `dir "sideways"`,
		"cipher = hmac-md5\nid = x\nkey = 00\ndata = 00\nmac = 00*17\n":          "at most 16 bytes",
		"cipher = hmac-md5\nid = x\nset = some\nkey = 00\ndata = 00\nmac = 00\n": `set "some"`,
	}
	for in, want := range cases {
		_, err := ParseVectors("v.txt", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "v.txt:") {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

func TestSoftPasses(t *testing.T) {
	for _, c := range catalog.CipherNames() {
		r := Check(soft.New(), c, Options{Full: true})
		if r.Status != Pass {
			t.Errorf("%s: %s %v", c, r.Status, r.Failure)
		}
		if c != "null" && r.KATs == 0 {
			t.Errorf("%s: no known-answer test ran", c)
		}
		if r.CrossChecks < 8 {
			t.Errorf("%s: only %d cross-checks", c, r.CrossChecks)
		}
	}
}

func TestFaultyEngines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hang := fault.NewHanging(ctx, "hangs-at-1024", soft.New(), fault.Sizes(1024))
	defer hang.Release()
	cases := []struct {
		name   string
		engine ocf.Driver
		cipher string
		want   []string
	}{
		{"corrupts one size", fault.NewCorrupting("flips-at-4096", soft.New(), fault.Sizes(4096)), "aes-128-cbc",
			[]string{"cross-check 4096 bytes", "encrypt of 4096 bytes", "expected "}},
		{"corrupts MACs", fault.NewCorrupting("flips-macs", soft.New(), nil), "hmac-sha1",
			[]string{"RFC 2202 HMAC-SHA-1 case 1", "mac of 8 bytes"}},
		{"errors", fault.NewFailing("errs-at-64", soft.New(), fault.Sizes(64)), "des-ede3-cbc",
			[]string{"64 bytes"}},
		{"hangs", hang, "aes-256-cbc", []string{"cross-check 1024 bytes", "timed out after 200ms"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.engine, tc.cipher, Options{Timeout: 200 * time.Millisecond})
			if r.Status != Fail || r.Failure == nil {
				t.Fatalf("status %s, failure %v", r.Status, r.Failure)
			}
			msg := r.Failure.String()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("failure %q lacks %q", msg, w)
				}
			}
		})
	}
}

// An error in the cross-check stage, here from the reference rather than
// the engine, fails the result after known answers that passed.
func TestCrossCheckErrorFails(t *testing.T) {
	ref := fault.NewFailing("broken-reference", soft.New(), nil)
	r := Check(soft.New(), "aes-128-cbc", Options{Reference: ref})
	if r.Status != Fail || r.Failure == nil {
		t.Fatalf("status %s, failure %v; want a failure from the cross-check", r.Status, r.Failure)
	}
	if r.KATs == 0 || r.CrossChecks != 0 {
		t.Errorf("%d known answers, %d cross-checks; want the known answers passed and no cross-check", r.KATs, r.CrossChecks)
	}
	if msg := r.Failure.String(); !strings.Contains(msg, "encrypt (reference)") || !strings.Contains(msg, "injected") {
		t.Errorf("failure %q does not name the reference's error", msg)
	}
}

// A status reads back as written; one this ocfw does not know fails to
// read rather than counting as absent.
func TestStatusJSON(t *testing.T) {
	for _, tc := range []struct {
		json string
		want Status
		err  string
	}{
		{`"pass"`, Pass, ""},
		{`"fail"`, Fail, ""},
		{`"absent"`, Absent, ""},
		{`"skipped"`, "", `self-test status "skipped": want pass, fail or absent`},
		{`1`, "", "want a string"},
	} {
		var s Status
		err := json.Unmarshal([]byte(tc.json), &s)
		if s != tc.want || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %q, %v; want %q, %q", tc.json, s, err, tc.want, tc.err)
		}
		if err == nil {
			if b, _ := json.Marshal(s); string(b) != tc.json {
				t.Errorf("%s written back as %s", tc.json, b)
			}
		}
	}
}
