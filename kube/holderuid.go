package kube

import (
	"slices"
	"strings"
)

// HolderClaim is a process that its devices alone place among the pods
// holding them, under its cgroup's pod UID: in the one pod holding them
// (ResolvePod, rule 2), or in any of the several whose containers
// Holders gives it.
type HolderClaim struct {
	// Pods are the holder pods ("namespace/name"), sorted, each once
	Pods   []string
	UID    string // the process's cgroup pod UID
	Device string // the GPU it runs on, for a log line
}

// HolderContest is a set of holder pods that processes of more cgroup pod
// UIDs than there are pods were placed among by their devices alone in
// one sample: some of them are no holder's.
type HolderContest struct {
	Pods    []string
	UIDs    []string // sorted
	Devices []string // sorted
	// Kept are the UIDs that keep the pods (those bound to them at the
	// sample before, still running), sorted; none where none does.
	Kept []string
}

// HolderUIDs keeps, from sample to sample, the cgroup pod UIDs that the
// pods holding a device are known by where processes are placed among
// them by their devices alone. Without pod metadata a process of a pod
// that reaches a GPU not allocated to it (all GPUs visible to a
// privileged container, or NVIDIA_VISIBLE_DEVICES=all) is placed so among
// the pods that hold the GPU; the device says nothing of its pod UID. A
// pod's processes all have its UID (its containers' cgroups are below the
// pod's), so n holder pods are known by n UIDs at most:
//
//   - the pods are bound to the UIDs whose processes are placed among them
//     (the first seen), while those processes run: a UID bound at the
//     sample before and placed there again keeps its place;
//   - UIDs new in a sample are given a place only where all of them fit
//     beside those kept (one pod, one UID: two containers of one pod are
//     one UID); where they do not, none of them is (ambiguous);
//   - a pod replaced since under the same name (a StatefulSet's) has a new
//     UID, the old one's processes being gone: it fits in the place they
//     left.
//
// A process of another pod that runs on the GPU while the holders' own do
// not, or before theirs, is still given a place: only pod metadata
// (rule 1) tells it apart. HolderUIDs is not safe for concurrent use.
type HolderUIDs struct {
	bound map[string][]string // holder pods (joined) -> UIDs, as of the last sample
}

// Settle takes one sample's claims, says which are refused (by index: of
// no holder) and which holder sets were contested, and binds each set
// claimed to its UIDs for the next sample. Sets not claimed in this
// sample are forgotten: what it keeps is bounded by one sample's claims.
func (h *HolderUIDs) Settle(claims []HolderClaim) (refused []bool, contests []HolderContest) {
	type holders struct {
		pods, uids, devices []string
	}
	bySet := map[string]*holders{}
	var order []string
	for _, c := range claims {
		k := strings.Join(c.Pods, " ")
		hd := bySet[k]
		if hd == nil {
			hd = &holders{pods: c.Pods}
			bySet[k] = hd
			order = append(order, k)
		}
		if !slices.Contains(hd.uids, c.UID) {
			hd.uids = append(hd.uids, c.UID)
		}
		if !slices.Contains(hd.devices, c.Device) {
			hd.devices = append(hd.devices, c.Device)
		}
	}
	bound := make(map[string][]string, len(bySet))
	for _, k := range order {
		hd := bySet[k]
		var kept, fresh []string
		for _, u := range hd.uids {
			if slices.Contains(h.bound[k], u) {
				kept = append(kept, u)
			} else {
				fresh = append(fresh, u)
			}
		}
		if len(kept)+len(fresh) <= len(hd.pods) {
			kept = append(kept, fresh...)
		}
		slices.Sort(kept)
		bound[k] = kept
		if len(hd.uids) > len(hd.pods) {
			slices.Sort(hd.uids)
			slices.Sort(hd.devices)
			contests = append(contests, HolderContest{Pods: hd.pods, UIDs: hd.uids, Devices: hd.devices, Kept: kept})
		}
	}
	h.bound = bound
	refused = make([]bool, len(claims))
	for i, c := range claims {
		refused[i] = !slices.Contains(bound[strings.Join(c.Pods, " ")], c.UID)
	}
	return refused, contests
}
