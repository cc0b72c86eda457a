#!/usr/bin/env bash
# Device calibration: measure on an H200 (or H100) what the simulator
# guesses (docs/calibration.md) and print one "key value" line per figure:
#   bw_fraction_<pct> TB/s      HBM copy bandwidth at MPS active-thread pct
#   mps_pair_alone TB/s         one bandwidth-bound MPS client alone
#   mps_pair_each TB/s          each of two co-located bandwidth-bound clients
#   ts_pair_each TB/s           each of the two, time-sliced (no MPS)
#   timeslice_<level>_each TFLOP/s  each of two saturating matmul tenants
#   mps_restart_seconds s       a client's exit-to-first-kernel restart time
# Feed the output to `go run ./test/device/calib` for the calibration rows.
#
# usage: test/device/calibrate.sh [OUTFILE]   (root: MPS daemon, compute-policy)
# Environment: PYTHON (python with PyTorch, default python3), SECONDS_PER (default 10)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-/dev/stdout}"
py="${PYTHON:-python3}"
secs="${SECONDS_PER:-10}"
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: this check needs an NVIDIA driver" >&2; exit 2; }
export CUDA_MPS_PIPE_DIRECTORY="${CUDA_MPS_PIPE_DIRECTORY:-/tmp/vgpu-calib-mps}"
export CUDA_MPS_LOG_DIRECTORY="$CUDA_MPS_PIPE_DIRECTORY"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY"
load() { "$py" "$here/calib.py" "$@"; }
stop_mps() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true; }
trap stop_mps EXIT
{
	nvidia-smi -q -d CLOCK >/dev/null
	for pct in 10 20 30 40 50 60 80 100; do
		stop_mps; nvidia-cuda-mps-control -d
		echo "bw_fraction_$pct $(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct load --kind copy --seconds "$secs")"
	done
	stop_mps; nvidia-cuda-mps-control -d
	echo "mps_pair_alone $(load --kind copy --seconds "$secs")"
	a=$(mktemp); b=$(mktemp)
	load --kind copy --seconds "$secs" >"$a" & load --kind copy --seconds "$secs" >"$b"; wait
	echo "mps_pair_each $(awk '{s+=$1} END {print s/2}' "$a" "$b")"
	start=$(date +%s.%N); load --kind copy --seconds 0 >/dev/null; end=$(date +%s.%N)
	echo "mps_restart_seconds $(awk -v s="$start" -v e="$end" 'BEGIN {print e-s}')"
	stop_mps
	load --kind copy --seconds "$secs" >"$a" & load --kind copy --seconds "$secs" >"$b"; wait
	echo "ts_pair_each $(awk '{s+=$1} END {print s/2}' "$a" "$b")"
	for level in 0 1 2 3; do
		nvidia-smi compute-policy --set-timeslice="$level" >/dev/null
		load --kind matmul --seconds "$secs" >"$a" & load --kind matmul --seconds "$secs" >"$b"; wait
		echo "timeslice_$(echo default short medium long | cut -d' ' -f$((level + 1)))_each $(awk '{s+=$1} END {print s/2}' "$a" "$b")"
	done
	nvidia-smi compute-policy --set-timeslice=0 >/dev/null
	rm -f "$a" "$b"
} >"$out"
