#!/bin/sh
# vgpu_exporter rebalancing hook for a Kubernetes node.
#
# Reads a rebalancing plan (JSON, docs/backends.md "Rebalancing hook") on
# stdin and evicts the pod of every move through the Eviction API, so that
# PodDisruptionBudgets hold: an eviction a budget forbids fails (HTTP 429)
# and the pod stays; a move's pod uid, where given, is the eviction's
# precondition (a pod of the name made since is not evicted); a pod gone already (the API server's NotFound of it)
# is a move made, as kubectl drain takes it. The scheduler (default, KAI, HAMi, ...) places the
# evicted pod's replacement; a move's to_uuid is advisory here.
# With "dry_run": true the evictions are sent with dryRun=All: the API
# server checks them, budgets included, and changes nothing.
# MIG layout changes are refused (exit 2): on Kubernetes they belong to the
# GPU operator's MIG manager (node label nvidia.com/mig.config).
#
# Needs: kubectl with rights to create pods/eviction, jq. The exporter
# does the same itself with --tuner.rebalance-hook=builtin:kubernetes-evict
# (no shell needed: the chart's image has none).
# It writes no file (the chart's container has a read-only root and no
# writable /tmp).
# Environment: KUBECTL (default kubectl), KUBECONFIG as kubectl reads it.
# Exit: 0 all evicted (or gone already); 1 some eviction failed (stderr names each); 2 bad plan;
# 127 jq or kubectl not found, or not an executable file (nothing done).
set -eu

KUBECTL=${KUBECTL:-kubectl}
for tool in jq "$KUBECTL"; do
	# dash's command -v takes any path there (a directory, a file that
	# cannot be run): a path it finds must be an executable file
	found=$(command -v "$tool" 2>/dev/null) || found=
	case "$found" in */*) [ -f "$found" ] && [ -x "$found" ] || found= ;; esac
	if [ -z "$found" ]; then
		printf 'kubernetes-evict: cannot run: %s not found, or not an executable file (PATH=%s); the hook needs jq and kubectl (KUBECTL names another)\n' "$tool" "$PATH" >&2
		exit 127
	fi
done
plan=$(cat)

if ! printf '%s' "$plan" | jq -e 'type == "object"' >/dev/null 2>&1; then
	echo "kubernetes-evict: the plan on stdin is not a JSON object" >&2
	exit 2
fi
if ! printf '%s' "$plan" | jq -e '([.moves // [], .mig // []] | all(type == "array" and all(.[]; type == "object"))) and all(.moves // [] | .[]; .pod // {} | type == "object")' >/dev/null 2>&1; then
	echo "kubernetes-evict: the plan's moves and mig are not arrays of objects (a move's pod an object)" >&2
	exit 2
fi
if [ "$(printf '%s' "$plan" | jq '.mig // [] | length')" -gt 0 ]; then
	echo "kubernetes-evict: MIG layout changes are not applied by this hook; use the GPU operator's MIG manager (label the node nvidia.com/mig.config)" >&2
	exit 2
fi
dry=$(printf '%s' "$plan" | jq '.dry_run == true')

# fields split by the unit separator: a tab run would merge empty fields;
# the moves are kept in a variable and piped, never in a file
moves=$(printf '%s' "$plan" | jq -r '.moves // [] | .[] | [.tenant // "", .pod.namespace // "", .pod.name // "", .pod.uid // ""] | map(tostring | gsub("[\u0000-\u001f]"; "?")) | join("\u001f")')
[ -n "$moves" ] || exit 0

# Check every move before evicting anything (each loop runs in a subshell
# of its pipe: its exit status is the script's).
sep=$(printf '\037')
printf '%s\n' "$moves" | while IFS="$sep" read -r tenant ns pod uid; do
	case "$ns" in '' | *[!a-z0-9.-]*) ns_bad=1 ;; *) ns_bad=0 ;; esac
	case "$pod" in '' | *[!a-z0-9.-]*) pod_bad=1 ;; *) pod_bad=0 ;; esac
	case "$uid" in *[!a-f0-9-]*) uid_bad=1 ;; *) uid_bad=0 ;; esac
	if [ "$ns_bad" = 1 ] || [ "$pod_bad" = 1 ] || [ "$uid_bad" = 1 ]; then
		printf '%s\n' "kubernetes-evict: the move of tenant '$tenant' names no valid pod (namespace '$ns', name '$pod', uid '$uid')" >&2
		exit 2
	fi
done || exit

printf '%s\n' "$moves" | {
	status=0
	while IFS="$sep" read -r tenant ns pod uid; do
		if [ "${#uid}" -eq 32 ] && [ "${uid#*-}" = "$uid" ]; then
			# a static pod's (its manifest's hash): the API server holds
			# only its mirror, whose eviction leaves the pod running
			printf '%s\n' "kubernetes-evict: $ns/$pod (tenant $tenant) is a static pod (uid $uid): an eviction leaves it running; not evicted" >&2
			status=1
			continue
		fi
		# the pod's UID, where the plan gives it, is the eviction's
		# precondition: a pod of the name made since is not evicted
		body=$(jq -cn --arg ns "$ns" --arg pod "$pod" --arg uid "$uid" --argjson dry "$dry" \
			'{apiVersion: "policy/v1", kind: "Eviction", metadata: {name: $pod, namespace: $ns}}
			 + (if $dry or $uid != "" then {deleteOptions: ((if $dry then {dryRun: ["All"]} else {} end)
			    + (if $uid != "" then {preconditions: {uid: $uid}} else {} end))} else {} end)')
		# kubectl's stderr is kept to tell a pod gone already (the API
		# server's NotFound of the pod: a move made, as kubectl drain takes
		# it) from a failure, and passed on
		if err=$(printf '%s' "$body" | "$KUBECTL" create --raw "/api/v1/namespaces/$ns/pods/$pod/eviction" -f - 2>&1 >/dev/null); then
			[ -z "$err" ] || printf '%s\n' "$err" >&2
			printf '%s\n' "evicted $ns/$pod (tenant $tenant, dry run $dry)"
		else
			case "$err" in
			*"(NotFound)"*"pods \"$pod\" not found"*)
				printf '%s\n' "gone $ns/$pod already (tenant $tenant, dry run $dry): nothing to evict"
				continue
				;;
			*"(Conflict)"*"recondition"*)
				[ -z "$uid" ] || {
					printf '%s\n' "$err" >&2
					printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed: it is not the pod planned (uid $uid), made since; not evicted" >&2
					status=1
					continue
				}
				;;
			esac
			[ -z "$err" ] || printf '%s\n' "$err" >&2
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed; a PodDisruptionBudget may forbid it now" >&2
			status=1
		fi
	done
	exit "$status"
}
