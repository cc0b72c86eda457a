#!/usr/bin/env bash
# Device check: run vgpu_exporter with the NVML backend next to a small CUDA
# load on a host with NVIDIA GPUs, save its /metrics and `nvidia-smi -q -x`
# taken at the same moment, and compare them (GPU count, UUIDs, memory size,
# SM clock, utilization, power draw and limit, temperature, MIG and
# persistence mode) with test/device/compare.
#
# usage: test/device/run.sh PATH/TO/vgpu_exporter [OUTDIR]
#
# Environment:
#   PORT        exporter port (default 9949, the exporter's own)
#   DURATION    seconds of load (default 30)
#   PYTHON      python with PyTorch (default python3)
#   COMPARE     a prebuilt compare binary (default: go run ./test/device/compare)
#   NO_LOAD=1   skip the CUDA load (utilization is then compared idle)
#   SETTLE      seconds to wait before reading when NO_LOAD=1 (default 3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [[ $# -lt 1 ]]; then
	echo "usage: $0 PATH/TO/vgpu_exporter [OUTDIR]" >&2
	exit 2
fi
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
out="${2:-$(mktemp -d -t vgpu-device-XXXXXX)}"
port="${PORT:-9949}"
duration="${DURATION:-30}"
python="${PYTHON:-python3}"
mkdir -p "$out"

[[ -x "$bin" ]] || { echo "not executable: $bin (build it with make build)" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: this check needs an NVIDIA driver" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl not found" >&2; exit 2; }

pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap cleanup EXIT

echo "== output in $out"
nvidia-smi -L | tee "$out/nvidia-smi-L.txt"

"$bin" --backend=nvml --web.listen-address=":$port" >"$out/exporter.log" 2>&1 &
pids+=("$!")

# Wait for the exporter to serve.
for _ in $(seq 1 50); do
	if curl -fsS "http://127.0.0.1:$port/metrics" -o /dev/null 2>/dev/null; then
		break
	fi
	if ! kill -0 "${pids[0]}" 2>/dev/null; then
		echo "exporter exited; its log:" >&2
		cat "$out/exporter.log" >&2
		exit 1
	fi
	sleep 0.2
done

if [[ "${NO_LOAD:-}" != 1 ]]; then
	"$python" "$here/load.py" --seconds "$duration" >"$out/load.log" 2>&1 &
	pids+=("$!")
	# Let the load reach a steady state before reading.
	sleep "$(( duration * 2 / 3 ))"
else
	sleep "${SETTLE:-3}"
fi

# Read both as close together as possible.
curl -fsS "http://127.0.0.1:$port/metrics" -o "$out/metrics.txt" &
curl_pid=$!
nvidia-smi -q -x >"$out/nvidia-smi.xml"
wait "$curl_pid" || { echo "scraping the exporter failed; its log:" >&2; cat "$out/exporter.log" >&2; exit 1; }

if [[ "${NO_LOAD:-}" != 1 ]]; then
	wait "${pids[1]}" || echo "load.py failed (exit $?); see $out/load.log" >&2
	cat "$out/load.log"
fi

echo "== comparison"
set +e
if [[ -n "${COMPARE:-}" ]]; then
	"$COMPARE" --metrics "$out/metrics.txt" --smi "$out/nvidia-smi.xml" >"$out/compare.txt" 2>&1
else
	(cd "$root" && go run ./test/device/compare --metrics "$out/metrics.txt" --smi "$out/nvidia-smi.xml") >"$out/compare.txt" 2>&1
fi
status=$?
set -e
cat "$out/compare.txt"
echo "== saved: $out/metrics.txt $out/nvidia-smi.xml $out/compare.txt $out/exporter.log"
exit "$status"
