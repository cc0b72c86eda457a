package tenant

import (
	"slices"
	"strings"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// A sample's processes are placed in their pods before any is attributed,
// so that the processes placed among the pods holding their devices by
// those devices alone can be checked against each other: without pod
// metadata that knows it, a process of a pod that reaches a GPU not
// allocated to it is placed among the pods that hold the GPU
// (kube.HolderUIDs says which of the cgroup pod UIDs so placed are
// theirs).

// placeKey is a process as one of the sample's devices lists it, in the
// MIG instance it is attributed in (nil: none).
type placeKey struct {
	p    *gpu.Process
	inst *gpu.MIGInstance
}

// placement is the sample's processes placed in their pods, and what
// settles the holders' UIDs from sample to sample.
type placement struct {
	subjects map[placeKey]*subject
	uids     kube.HolderUIDs
	// lines bounds the contested holders' log lines, by holder
	lines *ratelog.Keyed
}

// contestLogEvery is how often a holder contested by processes of several
// pod UIDs is logged at most; contestLogKeys, how many holders apart.
const (
	contestLogEvery = 10 * time.Minute
	contestLogKeys  = 16
)

// placeAll places the processes of r that will be attributed, where a pod
// mapping places them (subjectOf then gives them out), and refuses the
// holders' pods to those placed among them by their devices alone that
// are not theirs (see kube.HolderUIDs), logging the pods so contested.
func (b *Builder) placeAll(compiled *compiledConfig, r *gpu.Readings, podMap *kube.Mapping) {
	pl := &b.attr.place
	clear(pl.subjects)
	if podMap == nil || !compiled.needCgroup {
		return
	}
	if pl.subjects == nil {
		pl.subjects = map[placeKey]*subject{}
	}
	var claims []kube.HolderClaim
	var claimed []*subject
	for di := range r.Devices {
		d := &r.Devices[di]
		if !d.Up {
			continue
		}
		for i := range d.Processes {
			p := &d.Processes[i]
			var inst *gpu.MIGInstance
			if !wholeGPU(d) {
				if p.GPUInstanceID >= 0 {
					inst = d.MIGByGI(p.GPUInstanceID)
				}
			} else if inVM(d, p) {
				continue // attributed with its VM
			}
			sub := b.processSubject(compiled, podMap, d, p, inst)
			pl.subjects[placeKey{p, inst}] = sub
			if pods := holderPods(sub); len(pods) > 0 {
				claims = append(claims, kube.HolderClaim{Pods: pods, UID: sub.podUID, Device: d.UUID})
				claimed = append(claimed, sub)
			}
		}
	}
	refused, contests := pl.uids.Settle(claims)
	for i, sub := range claimed {
		if refused[i] {
			// another pod's process on the holders' GPU, maybe: the pod
			// is known by its UID only, and none of the holders'
			// containers is the process's
			sub.pod, sub.holders = &kube.PodRef{UID: sub.podUID}, nil
		}
	}
	if pl.lines == nil {
		pl.lines = ratelog.NewKeyed(contestLogEvery, contestLogKeys)
	}
	for _, c := range contests {
		pods := strings.Join(c.Pods, ",")
		held, ok := pl.lines.NoteAt(pods, r.Time)
		if !ok {
			continue
		}
		kept := strings.Join(c.Kept, ",")
		if kept == "" {
			kept = "none"
		}
		level.Warn(b.logger).Log("msg", "processes of more pod UIDs than pods hold their GPUs, which no pod metadata places them in: only the UIDs the pods were bound to at the sample before are given them (pod metadata tells them apart)",
			"pods", pods, "pod_uids", strings.Join(c.UIDs, ","), "kept", kept, "gpus", strings.Join(c.Devices, ","), "held_back", held)
	}
}

// holderPods are the pods ("namespace/name", sorted, each once) that sub's
// devices alone placed it among under its cgroup's pod UID: the one that
// ResolvePod gave it (byDevice), or those of the containers it may be in
// (its pod known by its UID only); none where it has no cgroup pod UID,
// or was placed otherwise.
func holderPods(sub *subject) []string {
	switch {
	case sub.podUID == "" || sub.pod == nil:
		return nil
	case sub.byDevice:
		return []string{sub.pod.Namespace + "/" + sub.pod.Name}
	case sub.pod.Name != "" || len(sub.holders) == 0:
		return nil
	}
	pods := make([]string, 0, len(sub.holders))
	for _, c := range sub.holders {
		pods = append(pods, c.Namespace+"/"+c.Name)
	}
	slices.Sort(pods)
	return slices.Compact(pods)
}

// subjectOf is the subject of p (in the MIG instance inst) that placeAll
// placed, else processSubject's.
func (b *Builder) subjectOf(compiled *compiledConfig, podMap *kube.Mapping, d *gpu.Device, p *gpu.Process, inst *gpu.MIGInstance) *subject {
	if sub, ok := b.attr.place.subjects[placeKey{p, inst}]; ok {
		return sub
	}
	return b.processSubject(compiled, podMap, d, p, inst)
}

// inVM says whether p is a process inside one of d's vGPU VMs, whose
// utilization is the VM's.
func inVM(d *gpu.Device, p *gpu.Process) bool {
	if p.VGPUInstance == 0 {
		return false
	}
	for i := range d.VGPUs {
		if d.VGPUs[i].ID == p.VGPUInstance {
			return true
		}
	}
	return false
}
