package main

import (
	"regexp"
	"strconv"
	"strings"
)

// goResult is one line of `go test -bench` output.
type goResult struct {
	Name    string             // without the -GOMAXPROCS suffix
	N       int64              // iterations
	Metrics map[string]float64 // unit -> value: "ns/op", "MB/s", "allocs/op", custom ones
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseGoBench reads benchmark result lines from go test output, which
// may be indented (a guest's output relayed by t.Log) and mixed with
// other text.
func parseGoBench(out string) []goResult {
	var res []goResult
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		r := goResult{Name: procsSuffix.ReplaceAllString(f[0], ""), N: n, Metrics: map[string]float64{}}
		ok := true
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				ok = false
				break
			}
			r.Metrics[f[i+1]] = v
		}
		if ok {
			res = append(res, r)
		}
	}
	return res
}
