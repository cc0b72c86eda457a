#!/bin/sh
# vgpu_exporter rebalancing hook for a Kubernetes node.
#
# Reads a rebalancing plan (JSON, docs/backends.md "Rebalancing hook") on
# stdin and evicts the pod of every move through the Eviction API, so that
# PodDisruptionBudgets hold: an eviction a budget forbids is refused (HTTP
# 429) and the pod stays. Each pod is read first (kubectl get): one that an
# eviction would not move, as kubectl drain refuses it, is refused and left
# be: no controller owns it (a bare pod, deleted for good), a DaemonSet
# does (made again on the same node), or it is a static pod's mirror. The
# eviction's precondition is the UID read; a move's pod uid, where given,
# must be it (a pod of the name made since is not evicted). A pod gone
# already (the API server's NotFound of it) is a move made, as kubectl
# drain takes it. The scheduler (default, KAI, HAMi, ...) places the
# evicted pod's replacement; a move's to_uuid is advisory here.
# With "dry_run": true the evictions are sent with dryRun=All: the API
# server checks them, budgets included, and changes nothing.
# MIG layout changes are refused (exit 2): on Kubernetes they belong to the
# GPU operator's MIG manager (node label nvidia.com/mig.config).
#
# Needs: kubectl with rights to get pods and create pods/eviction, jq. The
# exporter does the same itself with
# --tuner.rebalance-hook=builtin:kubernetes-evict (no shell needed: the
# chart's image has none).
# It writes no file (the chart's container has a read-only root and no
# writable /tmp).
# Environment: KUBECTL (default kubectl), KUBECONFIG as kubectl reads it.
# Stdout: "applied N" for each move made (N its place in the plan's moves,
# from 1), besides what it did.
# Exit: 0 all evicted (or gone already); 3 every move refused (a budget, a
# pod an eviction would not move), nothing changed; 4 some moves made, the
# others refused or failed; 1 some eviction failed, none made (stderr names
# each); 2 bad plan; 127 jq or kubectl not found, or not an executable file
# (nothing done).
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
	made=0 refused=0 failed=0 n=0
	while IFS="$sep" read -r tenant ns pod uid; do
		n=$((n + 1))
		if [ "${#uid}" -eq 32 ] && [ "${uid#*-}" = "$uid" ]; then
			# a static pod's (its manifest's hash): the API server holds
			# only its mirror, whose eviction leaves the pod running
			printf '%s\n' "kubernetes-evict: $ns/$pod (tenant $tenant) is a static pod (uid $uid): an eviction leaves it running; not evicted" >&2
			refused=$((refused + 1))
			continue
		fi
		# the pod read first: nothing (exit 0) when it is gone; kubectl's
		# errors go to stderr as they are
		if ! obj=$("$KUBECTL" get pod --namespace "$ns" "$pod" --ignore-not-found -o json </dev/null); then
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed: the pod could not be read" >&2
			failed=$((failed + 1))
			continue
		fi
		if [ -z "$obj" ]; then
			printf '%s\n' "gone $ns/$pod already (tenant $tenant, dry run $dry): nothing to evict" "applied $n"
			made=$((made + 1))
			continue
		fi
		# its UID and what controls it: mirror (a static pod's), none, or
		# the controller's kind and name; "" where the answer is not the pod
		read_pod='if (.metadata.namespace? != $ns or .metadata.name? != $pod or (.metadata.uid? // "") == "") then [""]
			else ([.metadata.ownerReferences // [] | .[] | select(.controller == true)] | .[0]) as $c
			| [.metadata.uid] + (if (.metadata.annotations // {} | has("kubernetes.io/config.mirror")) or $c.kind? == "Node" then ["mirror", ""]
			    elif $c == null then ["none", ""] else [($c.kind // ""), ($c.name // "")] end) end
			| map(tostring | gsub("[\u0000-\u001f]"; "?")) | join("\u001f")'
		info=$(printf '%s' "$obj" | jq -r --arg ns "$ns" --arg pod "$pod" "$read_pod" 2>/dev/null) || info=
		got=${info%%"$sep"*} rest=${info#*"$sep"}
		kind=${rest%%"$sep"*} owner=${rest#*"$sep"}
		why=
		case "$kind" in
		mirror) why="it is a static pod's mirror: its eviction leaves the pod running" ;;
		none) why="no controller owns it: evicted, it would be deleted for good, not moved" ;;
		DaemonSet) why="its controller is the DaemonSet $owner, which makes it again on the same node" ;;
		esac
		if [ -z "$got" ]; then
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed: kubectl's answer is not the pod" >&2
			failed=$((failed + 1))
			continue
		elif [ -n "$uid" ] && [ "$uid" != "$got" ]; then
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed: it is not the pod planned (uid $uid, the API server's $got), made since; not evicted" >&2
			failed=$((failed + 1))
			continue
		elif [ -n "$why" ]; then
			printf '%s\n' "kubernetes-evict: $ns/$pod (tenant $tenant) not evicted: $why" >&2
			refused=$((refused + 1))
			continue
		fi
		# the UID read is the eviction's precondition: no pod of the name
		# made since the read is evicted
		body=$(jq -cn --arg ns "$ns" --arg pod "$pod" --arg uid "$got" --argjson dry "$dry" \
			'{apiVersion: "policy/v1", kind: "Eviction", metadata: {name: $pod, namespace: $ns},
			  deleteOptions: ((if $dry then {dryRun: ["All"]} else {} end) + {preconditions: {uid: $uid}})}')
		# kubectl's stderr is kept to tell a pod gone already (the API
		# server's NotFound of the pod: a move made, as kubectl drain takes
		# it) from a failure, and passed on
		if err=$(printf '%s' "$body" | "$KUBECTL" create --raw "/api/v1/namespaces/$ns/pods/$pod/eviction" -f - 2>&1 >/dev/null); then
			[ -z "$err" ] || printf '%s\n' "$err" >&2
			printf '%s\n' "evicted $ns/$pod (tenant $tenant, dry run $dry)" "applied $n"
			made=$((made + 1))
			continue
		fi
		[ -z "$err" ] || printf '%s\n' "$err" >&2
		case "$err" in
		*"(NotFound)"*"pods \"$pod\" not found"*)
			printf '%s\n' "gone $ns/$pod already (tenant $tenant, dry run $dry): nothing to evict" "applied $n"
			made=$((made + 1))
			;;
		*"(Conflict)"*"recondition"*)
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed: it is not the pod read (uid $got), made since; not evicted" >&2
			failed=$((failed + 1))
			;;
		*"(TooManyRequests)"*)
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) refused for now: a PodDisruptionBudget allows no disruption (or the API server throttles)" >&2
			refused=$((refused + 1))
			;;
		*)
			printf '%s\n' "kubernetes-evict: eviction of $ns/$pod (tenant $tenant) failed" >&2
			failed=$((failed + 1))
			;;
		esac
	done
	if [ "$refused" -eq 0 ] && [ "$failed" -eq 0 ]; then
		exit 0
	elif [ "$made" -gt 0 ]; then
		exit 4
	elif [ "$failed" -eq 0 ]; then
		exit 3
	fi
	exit 1
}
