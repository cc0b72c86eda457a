#!/usr/bin/env bash
# Measures the exporter's scrape latency from outside, as a scraper sees
# it: the exporter runs on the simulator at scale (scale.yaml: 8 GPUs x 7
# MIG instances x 512 processes x 64 tenants) sampling every second, and
# curl scrapes /metrics SCRAPES times, one every PAUSE seconds (300 over
# at least 13 s by default, so that scrapes keep meeting new snapshots being
# encoded). It prints each scrape's time_total in milliseconds at p50, p99
# and max.
#
#   test/scrape-latency/scrape-latency.sh                 # builds ./cmd/vgpu_exporter
#   test/scrape-latency/scrape-latency.sh BINARY...       # measures these binaries
#
# Several binaries run side by side and are scraped in turn, so that on a
# shared machine each meets the same load from other processes: compare
# two builds in one run, not in two.
#
# Environment: SCRAPES (300), PAUSE (0.04), GZIP=1 to ask for gzip as
# Prometheus does (default: plain text, as curl asks), SAMPLE_INTERVAL
# (1s; 1h publishes no snapshot while scrapes are timed, which measures
# the machine's own noise: the floor under any figure of a run).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
scrapes=${SCRAPES:-300}
pause=${PAUSE:-0.04}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	bins=("$work/vgpu_exporter")
	(cd "$root" && CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations} go build -o "${bins[0]}" ./cmd/vgpu_exporter)
fi

urls=()
for i in "${!bins[@]}"; do
	port=$((20000 + RANDOM % 20000))
	"${bins[$i]}" --backend=sim --sim.scenario="$here/scale.yaml" --sample.interval="${SAMPLE_INTERVAL:-1s}" \
		--web.listen-address="127.0.0.1:$port" --log.level=warn >"$work/log$i" 2>&1 &
	pids+=($!)
	urls+=("http://127.0.0.1:$port")
done
for i in "${!bins[@]}"; do
	for _ in $(seq 100); do
		curl -sf -o /dev/null "${urls[$i]}/-/ready" && break
		kill -0 "${pids[$i]}" 2>/dev/null || break
		sleep 0.2
	done
	curl -sf -o /dev/null "${urls[$i]}/-/ready" || { echo "${bins[$i]} did not become ready" >&2; cat "$work/log$i" >&2; exit 1; }
done

curl_args=(-s -o /dev/null -w '%{time_total}\n')
if [ "${GZIP:-}" = 1 ]; then curl_args+=(-H 'Accept-Encoding: gzip'); fi
# A first scrape asks for the encoding, which the exporter then encodes
# as each snapshot is published; two samples pass before timing starts.
for u in "${urls[@]}"; do curl "${curl_args[@]}" "$u/metrics" >/dev/null; done
sleep 2

start=$(date +%s.%N)
for _ in $(seq "$scrapes"); do
	for i in "${!urls[@]}"; do curl "${curl_args[@]}" "${urls[$i]}/metrics" >>"$work/times$i"; done
	sleep "$pause"
done
end=$(date +%s.%N)

for i in "${!bins[@]}"; do
	kill -0 "${pids[$i]}" 2>/dev/null || { echo "${bins[$i]} exited" >&2; cat "$work/log$i" >&2; exit 1; }
	sort -g "$work/times$i" | awk -v start="$start" -v end="$end" -v bin="${1:+${bins[$i]}: }" '
		{ t[NR] = $1 * 1000 }
		function at(q,  i) { i = int(q * NR + 0.999999); if (i < 1) i = 1; return t[i] }
		END { printf "%s%d scrapes over %.1f s: p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", bin, NR, end - start, at(0.5), at(0.99), t[NR] }'
done
