#!/bin/sh
# Soft aes-128-cbc against `openssl speed -evp aes-128-cbc -elapsed`, side
# by side on this machine, at 16 and 8192 bytes. Each side runs TRIALS
# times (default 5), alternating, and the best run counts (a shared host's
# noise only ever slows a run down). Prints MB/s (10^6 bytes) and the ratio.
# Goals (issue 3): >= 0.9x at 8192 bytes, >= 0.5x at 16 bytes.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/soft.test" ./ocf/soft
for size in 16 8192; do
	for i in $(seq "${TRIALS:-5}"); do
		"$tmp/soft.test" -test.run XXX -test.bench "^BenchmarkSoft/aes-128-cbc/$size\$" -test.benchtime 1s |
			awk '/^BenchmarkSoft/ { for (i = 1; i < NF; i++) if ($(i+1) == "MB/s") print $i }' >>"$tmp/go.$size"
		# openssl prints 1000s of bytes per second.
		openssl speed -evp aes-128-cbc -elapsed -seconds 1 -bytes "$size" 2>/dev/null |
			awk '/^AES-128-CBC/ { sub("k", "", $2); print $2 / 1000 }' >>"$tmp/ossl.$size"
	done
	g=$(sort -g "$tmp/go.$size" | tail -1)
	o=$(sort -g "$tmp/ossl.$size" | tail -1)
	awk -v s="$size" -v g="$g" -v o="$o" 'BEGIN { printf "aes-128-cbc %5d bytes: go %8.1f MB/s  openssl %8.1f MB/s  ratio %.2f\n", s, g, o, g / o }'
done
