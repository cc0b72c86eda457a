package kube

import (
	"slices"
)

// HolderClaim is a process that ResolvePodByDevice placed by its devices
// alone (rule 2) in the pod holding them, under its cgroup's pod UID.
type HolderClaim struct {
	Namespace, Name string // the holder pod
	UID             string // the process's cgroup pod UID
	Device          string // the GPU it runs on, for a log line
}

// HolderContest is a holder pod that processes of more than one cgroup pod
// UID were placed in by their devices alone in one sample: at most one of
// them is the pod's.
type HolderContest struct {
	Namespace, Name string
	UIDs            []string // sorted
	Devices         []string // sorted
	// Kept is the UID that keeps the pod (the one it was bound to at the
	// sample before, still running); "" where none does.
	Kept string
}

// HolderUIDs keeps one cgroup pod UID per pod that processes are placed in
// by their devices alone (rule 2), from sample to sample. Without pod
// metadata a process of a pod that reaches a GPU not allocated to it (all
// GPUs visible to a privileged container, or NVIDIA_VISIBLE_DEVICES=all)
// is placed so in the pod that holds the GPU; the device says nothing of
// its pod UID. A pod's processes all have its UID (its containers'
// cgroups are below the pod's), so:
//
//   - where processes of two or more UIDs are placed in one holder in one
//     sample, none of them is given the pod (ambiguous), but for the UID
//     the holder was bound to at the sample before: that one keeps it;
//   - a holder is bound to the UID whose processes alone are placed in it
//     (the first seen), and stays bound while processes of that UID are
//     placed in it: a pod replaced since under the same name (a
//     StatefulSet's) has a new UID, the old one's processes being gone,
//     and is bound to it at the first sample without them.
//
// A process of another pod that runs on the GPU alone (while the holder
// runs nothing on it), or before the holder's own, is still given the
// holder: only pod metadata (rule 1) tells it apart. HolderUIDs is not
// safe for concurrent use.
type HolderUIDs struct {
	bound map[refKey]string // holder (no container) -> UID, as of the last sample
}

// Settle takes one sample's claims, says which are refused (by index: not
// the holder's) and which holders were contested, and binds each holder
// claimed to its UID for the next sample. Holders not claimed in this
// sample are forgotten: what it keeps is bounded by one sample's claims.
func (h *HolderUIDs) Settle(claims []HolderClaim) (refused []bool, contests []HolderContest) {
	type holder struct {
		uids, devices []string
	}
	byHolder := map[refKey]*holder{}
	var order []refKey
	for _, c := range claims {
		k := refKey{namespace: c.Namespace, name: c.Name}
		hd := byHolder[k]
		if hd == nil {
			hd = &holder{}
			byHolder[k] = hd
			order = append(order, k)
		}
		if !slices.Contains(hd.uids, c.UID) {
			hd.uids = append(hd.uids, c.UID)
		}
		if !slices.Contains(hd.devices, c.Device) {
			hd.devices = append(hd.devices, c.Device)
		}
	}
	bound := make(map[refKey]string, len(byHolder))
	for _, k := range order {
		hd := byHolder[k]
		prev, ok := h.bound[k]
		switch {
		case len(hd.uids) == 1:
			bound[k] = hd.uids[0]
		case ok && slices.Contains(hd.uids, prev):
			bound[k] = prev
		}
		if len(hd.uids) > 1 {
			slices.Sort(hd.uids)
			slices.Sort(hd.devices)
			contests = append(contests, HolderContest{Namespace: k.namespace, Name: k.name, UIDs: hd.uids, Devices: hd.devices, Kept: bound[k]})
		}
	}
	h.bound = bound
	refused = make([]bool, len(claims))
	for i, c := range claims {
		uid, ok := bound[refKey{namespace: c.Namespace, name: c.Name}]
		refused[i] = !ok || uid != c.UID
	}
	return refused, contests
}
