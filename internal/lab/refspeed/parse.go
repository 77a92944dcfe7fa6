package refspeed

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ParseOpenSSL reads `openssl speed -mr` output for one algorithm: the
// "+H:size:size..." header and the "+F:idx:name:bytes/s:..." row. It
// returns MB/s (10^6 bytes per second, as Go's benchmarks report) by size.
func ParseOpenSSL(out string) (map[int]float64, error) {
	var sizes []int
	var vals []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "+H:"):
			sizes = sizes[:0]
			for _, s := range strings.Split(line[3:], ":") {
				n, err := strconv.Atoi(s)
				if err != nil {
					return nil, fmt.Errorf("openssl speed header %q: %v", line, err)
				}
				sizes = append(sizes, n)
			}
		case strings.HasPrefix(line, "+F:"):
			f := strings.Split(line, ":")
			if len(f) < 4 {
				return nil, fmt.Errorf("openssl speed row %q: too short", line)
			}
			vals = f[3:]
		}
	}
	if len(sizes) == 0 || len(vals) == 0 {
		return nil, fmt.Errorf("no +H/+F lines in openssl speed output: %q", tail(out, 300))
	}
	if len(sizes) != len(vals) {
		return nil, fmt.Errorf("openssl speed: %d sizes but %d figures", len(sizes), len(vals))
	}
	res := map[int]float64{}
	for i, s := range sizes {
		v, err := strconv.ParseFloat(vals[i], 64)
		if err != nil {
			return nil, fmt.Errorf("openssl speed figure %q: %v", vals[i], err)
		}
		res[s] = v / 1e6
	}
	return res, nil
}

// SpeedCell is one line of cryptodev-linux's tests/speed: a cipher
// ("NULL", "AES-128-CBC", as its headers name them) at one chunk size.
type SpeedCell struct {
	Cipher string  `json:"cipher"`
	Size   int     `json:"size"`
	MBps   float64 `json:"mbps"` // 10^6 bytes per second
}

var (
	speedHeader = regexp.MustCompile(`Testing (\S+) cipher:`)
	speedLine   = regexp.MustCompile(`Encrypting in chunks of (\d+) bytes: done\. ([0-9.]+) ([KMGT]?)(i?)B in ([0-9.]+) secs: [0-9.]+ [KMGT]?i?B/sec`)
	speedError  = regexp.MustCompile(`(?m)^.*(ioctl\(|open\(|malloc\(|posix_memalign).*$`)
)

// ParseCryptodevSpeed reads tests/speed's output, stdout and stderr
// apart: the program prints its "Testing X cipher:" headers unbuffered
// to stderr and its results buffered to stdout, so in one stream a
// header lands in the middle of the line before it. Each cipher's chunk
// sizes grow from 512 to 65536 bytes: a size not above the one before
// starts the next cipher, named by the next header. An error message
// (a failed ioctl ends the program's loop early) is an error.
func ParseCryptodevSpeed(stdout, stderr string) ([]SpeedCell, error) {
	if m := speedError.FindString(stdout + "\n" + stderr); m != "" {
		return nil, fmt.Errorf("cryptodev-linux tests/speed failed: %s", strings.TrimSpace(m))
	}
	var ciphers []string
	for _, m := range speedHeader.FindAllStringSubmatch(stderr, -1) {
		ciphers = append(ciphers, m[1])
	}
	var cells []SpeedCell
	group, last := -1, 0
	for _, m := range speedLine.FindAllStringSubmatch(stdout, -1) {
		// The amount over the time: the amount has as many decimals
		// as the rate in the same unit, and more digits before them.
		size, _ := strconv.Atoi(m[1])
		v, _ := strconv.ParseFloat(m[2], 64)
		secs, _ := strconv.ParseFloat(m[5], 64)
		if secs <= 0 {
			return nil, fmt.Errorf("cryptodev-linux tests/speed: %q: no time", m[0])
		}
		if size <= last || group < 0 {
			group++
		}
		last = size
		if group >= len(ciphers) {
			return nil, fmt.Errorf("cryptodev-linux tests/speed: more runs of sizes than the %d \"Testing ... cipher\" headers on stderr (%s)", len(ciphers), strings.Join(ciphers, ", "))
		}
		mult := 1.0
		if k := strings.Index("KMGT", m[3]); m[3] != "" && k >= 0 {
			base := 1000.0
			if m[4] == "i" {
				base = 1024
			}
			for range k + 1 {
				mult *= base
			}
		}
		cells = append(cells, SpeedCell{Cipher: ciphers[group], Size: size, MBps: v * mult / secs / 1e6})
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("no \"Encrypting in chunks\" results in cryptodev-linux tests/speed's output: %q", tail(stdout, 300))
	}
	if group+1 != len(ciphers) {
		return nil, fmt.Errorf("cryptodev-linux tests/speed: %d headers (%s) but results for %d ciphers", len(ciphers), strings.Join(ciphers, ", "), group+1)
	}
	return cells, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
