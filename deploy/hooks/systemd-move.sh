#!/bin/sh
# vgpu_exporter rebalancing hook for a host whose GPU workloads are systemd
# services.
#
# Reads a rebalancing plan (JSON, docs/backends.md "Rebalancing hook") on
# stdin. For every move it writes a drop-in
# $SYSTEMD_UNIT_DIR/UNIT.d/50-vgpu-gpu.conf that sets
# CUDA_VISIBLE_DEVICES to the move's to_uuid, reloads systemd once, and
# restarts each unit. With "dry_run": true it prints what it would do and
# changes nothing. MIG layout changes are refused (exit 2): drain the GPU
# and apply them with nvidia-smi mig, or let the exporter's NVML backend do it.
#
# Needs: systemctl (root), jq.
# Environment: SYSTEMCTL (default systemctl), SYSTEMD_UNIT_DIR (default
# /etc/systemd/system).
# Exit: 0 done; 1 a restart failed (stderr names it); 2 bad plan.
set -eu

SYSTEMCTL=${SYSTEMCTL:-systemctl}
UNIT_DIR=${SYSTEMD_UNIT_DIR:-/etc/systemd/system}
plan=$(cat)

if ! printf '%s' "$plan" | jq -e 'type == "object"' >/dev/null 2>&1; then
	echo "systemd-move: the plan on stdin is not a JSON object" >&2
	exit 2
fi
if [ "$(printf '%s' "$plan" | jq '.mig // [] | length')" -gt 0 ]; then
	echo "systemd-move: MIG layout changes are not applied by this hook" >&2
	exit 2
fi
dry=$(printf '%s' "$plan" | jq '.dry_run == true')

moves=$(mktemp)
trap 'rm -f "$moves"' EXIT
printf '%s' "$plan" | jq -r '.moves // [] | .[] | [.tenant // "", .unit // "", .to_uuid // ""] | @tsv' >"$moves"

tab=$(printf '\t')
while IFS="$tab" read -r tenant unit to; do
	case "$unit" in '' | -* | .* | *[!A-Za-z0-9@._:-]*) unit_bad=1 ;; *.service) unit_bad=0 ;; *) unit_bad=1 ;; esac
	case "$to" in '' | *[!A-Za-z0-9-]*) to_bad=1 ;; *) to_bad=0 ;; esac
	if [ "$unit_bad" = 1 ] || [ "$to_bad" = 1 ]; then
		echo "systemd-move: the move of tenant '$tenant' needs a .service unit and a GPU UUID (unit '$unit', to '$to')" >&2
		exit 2
	fi
done <"$moves"

if [ "$dry" = true ]; then
	while IFS="$tab" read -r tenant unit to; do
		echo "would restart $unit (tenant $tenant) with CUDA_VISIBLE_DEVICES=$to"
	done <"$moves"
	exit 0
fi

while IFS="$tab" read -r tenant unit to; do
	dir="$UNIT_DIR/$unit.d"
	mkdir -p "$dir"
	printf '# Written by the vgpu_exporter rebalancing hook (tenant %s).\n[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=%s\n' "$tenant" "$to" >"$dir/.50-vgpu-gpu.conf.tmp"
	mv "$dir/.50-vgpu-gpu.conf.tmp" "$dir/50-vgpu-gpu.conf"
done <"$moves"
"$SYSTEMCTL" daemon-reload

status=0
while IFS="$tab" read -r tenant unit to; do
	if "$SYSTEMCTL" restart "$unit" </dev/null; then
		echo "restarted $unit (tenant $tenant) on $to"
	else
		echo "systemd-move: restart of $unit (tenant $tenant) failed" >&2
		status=1
	fi
done <"$moves"
exit "$status"
