#!/bin/sh
# vgpu_exporter rebalancing hook for a host whose GPU workloads are systemd
# services.
#
# Reads a rebalancing plan (JSON, docs/backends.md "Rebalancing hook") on
# stdin. For every move it writes a drop-in
# $SYSTEMD_UNIT_DIR/UNIT.d/50-vgpu-gpu.conf that sets
# CUDA_VISIBLE_DEVICES to the move's to_uuid, reloads systemd once, and
# restarts each unit. A move without a unit but with a PID names the
# systemd service that PID runs in (its cgroup, under PROC_ROOT). With
# "dry_run": true it prints what it would do and
# changes nothing. MIG layout changes are refused (exit 2): drain the GPU
# and apply them with nvidia-smi mig, or let the exporter's NVML backend do it.
#
# A unit's name is taken as systemd writes it, escapes included
# (train@gpu\x2d0.service, as systemd-escape and the cgroup path have it).
#
# Needs: systemctl (root), jq.
# Environment: SYSTEMCTL (default systemctl), SYSTEMD_UNIT_DIR (default
# /etc/systemd/system), PROC_ROOT (default /proc).
# Stdout: "applied N" for each move made (N its place in the plan's moves,
# from 1; the moves of one unit made by its one restart), besides what it
# did.
# Exit: 0 done; 4 some restarts done, others failed (stderr names each);
# 1 no restart done, or anything else failed; 2 bad plan; 127 jq or
# systemctl not found (nothing done). It never exits 3 (refused): a
# command's own status that ends it (systemctl's 3, jq's) reads as 1.
set -eu

given= moves= units= ours=
# quit exits with a status this script means; any other end (a command
# failing under set -e) is 1
quit() {
	ours=1
	exit "$1"
}
trap 'st=$?; rm -f ${given:+"$given"} ${moves:+"$moves"} ${units:+"$units"}; [ -n "$ours" ] || [ "$st" -eq 0 ] || exit 1' EXIT

SYSTEMCTL=${SYSTEMCTL:-systemctl}
UNIT_DIR=${SYSTEMD_UNIT_DIR:-/etc/systemd/system}
PROC_ROOT=${PROC_ROOT:-/proc}
for tool in jq "$SYSTEMCTL"; do
	# dash's command -v takes any path there (a directory, a file that
	# cannot be run): a path it finds must be an executable file
	found=$(command -v "$tool" 2>/dev/null) || found=
	case "$found" in */*) [ -f "$found" ] && [ -x "$found" ] || found= ;; esac
	if [ -z "$found" ]; then
		printf 'systemd-move: cannot run: %s not found, or not an executable file (PATH=%s); the hook needs jq and systemctl (SYSTEMCTL names another)\n' "$tool" "$PATH" >&2
		quit 127
	fi
done
plan=$(cat)

# unit_of_pid prints the system manager's service PID $1 runs in (the
# innermost *.service of its cgroup, itself or the parent of a plain
# subgroup), nothing when there is none: a container's or a pod's process
# (its runtime's service is not its own: restarting that would restart
# every container), a session scope, a user manager's unit, a cgroup named
# like a service below one that is not a slice, a plain subgroup named by
# 64 hex digits (a container's, as runc names one), a cgroup file that
# lists a hierarchy or a controller twice, or hierarchies other than PID
# 1's.
unit_of_pid() {
	f="$PROC_ROOT/$1/cgroup"
	[ -r "$f" ] || return 0
	# a hierarchy or a controller listed twice: a line forged by a cgroup
	# name with a line break in it (the kernel writes names unescaped)
	if [ -n "$(cut -d: -f1 "$f" | sort | uniq -d)" ] ||
		[ -n "$(cut -d: -f2 "$f" | tr ',' '\n' | grep -v '^$' | sort | uniq -d)" ]; then
		return 0
	fi
	# the kernel lists the same hierarchies for every process: one that PID
	# 1's file lacks (a "0::" line on a host with no cgroup2 mounted, where
	# a kernel before 4.13 let a delegated name=systemd subtree name a
	# cgroup "x\n0::/...") is forged too
	if [ -r "$PROC_ROOT/1/cgroup" ] &&
		[ "$(cut -d: -f1 "$f" | sort)" != "$(cut -d: -f1 "$PROC_ROOT/1/cgroup" | sort)" ]; then
		return 0
	fi
	if grep -Eq 'kubepods|docker|libpod|crio|containerd|\.scope|/user@' "$f"; then
		return 0
	fi
	path=$(sed -n 's/^0:://p' "$f" | head -n 1)
	[ -n "$path" ] || path=$(sed -n 's/^[0-9]*:name=systemd://p' "$f" | head -n 1)
	above=${path%/*}
	leaf=${path##*/}
	case "$leaf" in
	?*.service) unit=$leaf ;;
	'' | *[!A-Za-z0-9_-]*) return 0 ;;
	*)
		# a container's cgroup, not a subgroup of the service's own
		if printf '%s\n' "$leaf" | grep -Eq '^[0-9A-Fa-f]{64}$'; then
			return 0
		fi
		unit=${above##*/}
		above=${above%/*}
		case "$unit" in ?*.service) ;; *) return 0 ;; esac
		;;
	esac
	# the system's manager puts a service in slices alone, from the root
	# (or from the .. segments of a path relative to the reader's cgroup
	# namespace) down: a cgroup named like a service anywhere inside
	# another service's (a subtree delegated to it), slices it made above
	# it included, is that service's own, and no unit to restart
	while [ "${above#/../}" != "$above" ] || [ "$above" = /.. ]; do
		above=${above#/..}
	done
	case "$above" in '' | /*) ;; *) return 0 ;; esac
	while [ -n "$above" ]; do
		case "${above##*/}" in ?*.slice) ;; *) return 0 ;; esac
		above=${above%/*}
	done
	printf '%s\n' "$unit"
}

if ! printf '%s' "$plan" | jq -e 'type == "object"' >/dev/null 2>&1; then
	echo "systemd-move: the plan on stdin is not a JSON object" >&2
	quit 2
fi
if ! printf '%s' "$plan" | jq -e '[.moves // [], .mig // []] | all(type == "array" and all(.[]; type == "object"))' >/dev/null 2>&1; then
	echo "systemd-move: the plan's moves and mig are not arrays of objects" >&2
	quit 2
fi
if [ "$(printf '%s' "$plan" | jq '.mig // [] | length')" -gt 0 ]; then
	echo "systemd-move: MIG layout changes are not applied by this hook" >&2
	quit 2
fi
dry=$(printf '%s' "$plan" | jq '.dry_run == true')

given=$(mktemp)
moves=$(mktemp)
units=$(mktemp)
# fields split by the unit separator: a tab run would merge empty fields
printf '%s' "$plan" | jq -r '.moves // [] | .[] | [.tenant // "", .unit // "", .to_uuid // "", .pid // ""] | map(tostring | gsub("[\u0000-\u001f]"; "?")) | join("\u001f")' >"$given"

sep=$(printf '\037')
seen=' '
n=0
while IFS="$sep" read -r tenant unit to pid; do
	n=$((n + 1))
	case "$pid" in '' | *[!0-9]*) ;; *) [ -n "$unit" ] || unit=$(unit_of_pid "$pid") ;; esac
	# each move by its place in the plan, for the "applied N" of its unit
	printf '%s\037%s\n' "$n" "$unit" >>"$units"
	# several processes of one service: it is restarted once, and to one GPU
	case "$seen" in
	*" $unit=$to "*) [ -n "$unit" ] && continue ;;
	*" $unit="*)
		if [ -n "$unit" ]; then
			printf '%s\n' "systemd-move: the plan moves $unit to more than one GPU" >&2
			quit 2
		fi
		;;
	esac
	seen="$seen$unit=$to "
	printf '%s\037%s\037%s\n' "$tenant" "$unit" "$to" >>"$moves"
done <"$given"

while IFS="$sep" read -r tenant unit to; do
	# a \ for systemd's escapes (\x2d): the name is quoted wherever it is used
	case "$unit" in '' | -* | .* | *[!A-Za-z0-9@._:\\-]*) unit_bad=1 ;; *.service) unit_bad=0 ;; *) unit_bad=1 ;; esac
	case "$to" in '' | *[!A-Za-z0-9-]*) to_bad=1 ;; *) to_bad=0 ;; esac
	if [ "$unit_bad" = 1 ] || [ "$to_bad" = 1 ]; then
		printf '%s\n' "systemd-move: the move of tenant '$tenant' needs a .service unit and a GPU UUID (unit '$unit', to '$to')" >&2
		quit 2
	fi
done <"$moves"

if [ "$dry" = true ]; then
	while IFS="$sep" read -r tenant unit to; do
		printf '%s\n' "would restart $unit (tenant $tenant) with CUDA_VISIBLE_DEVICES=$to"
	done <"$moves"
	quit 0
fi

while IFS="$sep" read -r tenant unit to; do
	dir="$UNIT_DIR/$unit.d"
	mkdir -p "$dir"
	printf '# Written by the vgpu_exporter rebalancing hook (tenant %s).\n[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=%s\n' "$tenant" "$to" >"$dir/.50-vgpu-gpu.conf.tmp"
	mv "$dir/.50-vgpu-gpu.conf.tmp" "$dir/50-vgpu-gpu.conf"
done <"$moves"
if ! "$SYSTEMCTL" daemon-reload </dev/null; then
	echo "systemd-move: systemctl daemon-reload failed: no unit restarted" >&2
	quit 1
fi

made=0 failed=0
while IFS="$sep" read -r tenant unit to; do
	if "$SYSTEMCTL" restart "$unit" </dev/null; then
		printf '%s\n' "restarted $unit (tenant $tenant) on $to"
		while IFS="$sep" read -r n u; do
			[ "$u" != "$unit" ] || printf '%s\n' "applied $n"
		done <"$units"
		made=$((made + 1))
	else
		printf '%s\n' "systemd-move: restart of $unit (tenant $tenant) failed" >&2
		failed=$((failed + 1))
	fi
done <"$moves"
if [ "$failed" -eq 0 ]; then
	quit 0
elif [ "$made" -gt 0 ]; then
	quit 4
fi
quit 1
