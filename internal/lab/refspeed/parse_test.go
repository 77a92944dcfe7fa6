package refspeed

import (
	"math"
	"strings"
	"testing"
)

func TestParseOpenSSL(t *testing.T) {
	tests := []struct {
		name, out string
		want      map[int]float64
		err       string
	}{
		{"all sizes", "+DT:AES-128-CBC:1:16\n+R:1:AES-128-CBC:1.0\n+H:16:64:256:1024:8192:16384\n+F:25:AES-128-CBC:620595344.00:1200000000.00:1.1e9:1.2e9:1.21e9:1.22e9\n",
			map[int]float64{16: 620.595344, 64: 1200, 256: 1100, 1024: 1200, 8192: 1210, 16384: 1220}, ""},
		// What -engine afalg adds before the rows.
		{"engine", "Engine \"afalg\" set.\n+DT:AES-128-CBC:1:16\n+R:5290:AES-128-CBC:1.00\n+H:16\n+F:25:AES-128-CBC:84640.00\n",
			map[int]float64{16: 0.08464}, ""},
		{"hmac", "+H:16\n+F:9:hmac(sha1):38085552.00\n", map[int]float64{16: 38.085552}, ""},
		{"no rows", "Error: unknown cipher\n", nil, "no +H/+F"},
		{"count mismatch", "+H:16:64\n+F:1:X:5\n", nil, "2 sizes but 1 figures"},
		{"bad figure", "+H:16\n+F:1:X:fast\n", nil, "figure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOpenSSL(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for s, v := range tc.want {
				if d := got[s] - v; d > 1e-6 || d < -1e-6 {
					t.Errorf("size %d: %v MB/s, want %v", s, got[s], v)
				}
			}
		})
	}
}

const speedFirst = "\tEncrypting in chunks of 512 bytes: done. 61.44 MB in 5.00 secs: 12.29 MB/sec\n"

// speedOut is tests/speed's stdout for two ciphers, as its printf
// formats write it.
const speedOut = speedFirst +
	"\tEncrypting in chunks of 1024 bytes: done. 112.13 MB in 5.00 secs: 22.43 MB/sec\n" +
	"\tEncrypting in chunks of 65536 bytes: done. 1.31 GB in 5.00 secs: 0.26 GB/sec\n" +
	"\tEncrypting in chunks of 512 bytes: done. 820.22 KB in 5.01 secs: 163.72 KB/sec\n" +
	"\tEncrypting in chunks of 1024 bytes: done. 1.64 MB in 5.00 secs: 0.33 MB/sec\n"

func TestParseCryptodevSpeed(t *testing.T) {
	headers := "Testing NULL cipher: \n\nTesting AES-128-CBC cipher: \n"
	tests := []struct {
		name, stdout, stderr string
		want                 []SpeedCell
		err                  string
	}{
		{"two ciphers", speedOut, headers, []SpeedCell{
			{"NULL", 512, 12.288}, {"NULL", 1024, 22.426}, {"NULL", 65536, 262},
			{"AES-128-CBC", 512, 0.163716567}, {"AES-128-CBC", 1024, 0.328}}, ""},
		{"binary units", "\tEncrypting in chunks of 4096 bytes: done. 2.00 MiB in 2.00 secs: 1.00 MiB/sec\n", "Testing NULL cipher: \n",
			[]SpeedCell{{"NULL", 4096, 1.048576}}, ""},
		// A failed session ends the program with perror's line.
		{"ioctl failed", speedFirst, "Testing NULL cipher: \n\nTesting AES-128-CBC cipher: \nioctl(CIOCGSESSION): No such file or directory\n", nil, "ioctl(CIOCGSESSION)"},
		{"one header short", speedOut, "Testing NULL cipher: \n", nil, "more runs of sizes than the 1"},
		{"a header without results", speedFirst, headers, nil, "2 headers (NULL, AES-128-CBC) but results for 1"},
		{"nothing", "", "open(): No such file or directory\n", nil, "open()"},
		{"no results", "garbage\n", headers, nil, "no \"Encrypting in chunks\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCryptodevSpeed(tc.stdout, tc.stderr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Cipher != w.Cipher || g.Size != w.Size || math.Abs(g.MBps-w.MBps) > 1e-6*w.MBps {
					t.Errorf("cell %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestResultAddAndParse(t *testing.T) {
	var r Result
	r.Add(Row{Path: PathAFALG, Cipher: "aes-128-cbc", Engine: "e", Ref: map[int]float64{16: 1}, OCF: map[int]float64{16: 2}})
	r.Add(Row{Path: PathAFALG, Cipher: "aes-128-cbc", Engine: "e", Ref: map[int]float64{16: 3}, OCF: map[int]float64{16: 1}})
	r.Add(Row{Path: PathDevCrypto, Cipher: "aes-128-cbc", Engine: "e", Ref: map[int]float64{512: 1}, OCF: map[int]float64{512: 1}})
	if len(r.Rows) != 2 || r.Rows[0].Ref[16] != 3 || r.Rows[0].OCF[16] != 2 {
		t.Fatalf("rows after Add: %+v, want two, the first with the best of each side (3, 2)", r.Rows)
	}
	line, err := r.Line()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseResult("=== RUN x\n    host_test.go:1: guest output:\n        " + line + "\n--- PASS")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 2 || got.Rows[1].Ref[512] != 1 {
		t.Errorf("parsed %+v", got.Rows)
	}
	for _, bad := range []string{"no marker\n", Marker + "{\"rows\":[]}\n", Marker + "{\"rows\":[{\"path\":\"afalg\",\"ref_mbps\":{\"16\":1}}]}\n", Marker + "{\n"} {
		if _, err := ParseResult(bad); err == nil {
			t.Errorf("ParseResult(%q) accepted it", bad)
		}
	}
}
