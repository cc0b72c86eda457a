package tenant

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// PodInfoOptions turn on the pod info of Snapshot.PodInfo: which container
// of which pod holds which GPU (or MIG instance), as the kubelet's
// pod-resources API says, with the tenant of its pod.
type PodInfoOptions struct {
	On bool
	// MaxSeries bounds PodInfo.Allocations; those beyond are left out,
	// counted and logged. 0 or less: DefaultPodInfoMaxSeries.
	MaxSeries int
}

// DefaultPodInfoMaxSeries is the default bound on pod info entries: above
// eight GPUs of seven MIG instances each, or of 48 time-sliced or MPS
// replicas each held by one container.
const DefaultPodInfoMaxSeries = 512

// PodInfo is the state of the pod info (see PodInfoOptions).
type PodInfo struct {
	// Allocations has one entry per container and GPU (or MIG instance)
	// of this sample's readings that the latest pod mapping assigns it,
	// at most MaxSeries, by GPU, GPU instance, namespace, pod, container.
	Allocations []PodAllocation
	// DroppedTotal counts the allocations left out by MaxSeries since the
	// exporter started, each once when it is first left out.
	DroppedTotal uint64
	MaxSeries    int
}

// PodAllocation is one container's GPU (or MIG instance) and its tenant.
type PodAllocation struct {
	Tenant      string
	GPU         int    // device index
	UUID        string // device UUID
	GPUInstance string // MIG GPU instance ID; "" for a whole GPU
	Namespace   string
	Pod         string
	Container   string
}

// podAllocKey is an allocation without its tenant: what the bound keeps
// from one sample to the next.
type podAllocKey struct{ uuid, gi, namespace, pod, container string }

func (a *PodAllocation) key() podAllocKey {
	return podAllocKey{a.UUID, a.GPUInstance, a.Namespace, a.Pod, a.Container}
}

// podInfoState is Build's memory of the pod info: the allocations served
// and those left out by the bound in the previous sample.
type podInfoState struct {
	kept, dropped map[podAllocKey]bool
	droppedTotal  uint64
}

// devicePlace is a GPU, or a MIG instance of it, of the readings.
type devicePlace struct {
	gpu  int
	uuid string
	gi   string
}

// deviceAt is what a device ID of the pod mapping names in the readings.
type deviceAt struct {
	devicePlace
	migUUID string
}

// devicePlaces indexes the up devices of r by the IDs a pod mapping names
// them by: GPU UUIDs and indexes, MIG UUIDs and the older MIG device IDs.
func devicePlaces(r *gpu.Readings) map[string]deviceAt {
	out := map[string]deviceAt{}
	if r == nil {
		return out
	}
	for i := range r.Devices {
		d := &r.Devices[i]
		if !d.Up {
			continue
		}
		for _, id := range gpuDeviceIDs(d) {
			out[id] = deviceAt{devicePlace: devicePlace{d.Index, d.UUID, ""}}
		}
		for j := range d.MIG {
			inst := &d.MIG[j]
			for _, ci := range inst.ComputeInstances() {
				for _, id := range migDeviceIDs(d, inst.GPUInstanceID, ci) {
					out[id] = deviceAt{devicePlace{d.Index, d.UUID, strconv.Itoa(inst.GPUInstanceID)}, ci.UUID}
				}
			}
		}
	}
	return out
}

// podInfo lists the allocations of podMap on the devices of r, each with
// the tenant its pod's processes on that device were attributed to in
// usage (when they all went to one), else the tenant the pod alone is
// given: the tenants file's one matching selector (a selector that needs
// an executable, user or cgroup matches no pod alone), else the pod
// tenancy's. Those already served come first under the bound, so that a
// newcomer never displaces a series.
func (b *Builder) podInfo(compiled *compiledConfig, r *gpu.Readings, podMap *kube.Mapping, usage []Usage) *PodInfo {
	max := b.podInfoOpts.MaxSeries
	if max <= 0 {
		max = DefaultPodInfoMaxSeries
	}
	places := devicePlaces(r)
	byProcs := processTenants(usage)
	var all []PodAllocation
	seen := map[podAllocKey]bool{}
	for _, al := range podMap.Allocations() {
		pl, ok := places[al.Device]
		if !ok {
			continue
		}
		a := PodAllocation{GPU: pl.gpu, UUID: pl.uuid, GPUInstance: pl.gi, Namespace: al.Pod.Namespace, Pod: al.Pod.Name, Container: al.Pod.Container}
		if seen[a.key()] {
			continue // the same MIG instance named two ways
		}
		seen[a.key()] = true
		if t, ok := byProcs[podPlace{pl.devicePlace, a.Namespace, a.Pod}]; ok && t != "" {
			a.Tenant = t
		} else {
			a.Tenant = b.podTenant(compiled, pl, al.Pod)
		}
		all = append(all, a)
	}
	// Served before first, then the others in order, up to the bound.
	st := &b.podInfoState
	kept := map[podAllocKey]bool{}
	for pass := range 2 {
		for i := range all {
			k := all[i].key()
			if st.kept[k] == (pass == 0) && len(kept) < max {
				kept[k] = true
			}
		}
	}
	out := &PodInfo{MaxSeries: max}
	dropped := map[podAllocKey]bool{}
	var newly []string
	for i := range all {
		k := all[i].key()
		if kept[k] {
			out.Allocations = append(out.Allocations, all[i])
			continue
		}
		dropped[k] = true
		if !st.dropped[k] {
			newly = append(newly, fmt.Sprintf("%s/%s/%s on %s", k.namespace, k.pod, k.container, k.uuid))
		}
	}
	if len(newly) > 0 {
		st.droppedTotal += uint64(len(newly))
		level.Warn(b.logger).Log("msg", "pod info series left out: more container GPU allocations than --kubernetes.pod-info.max-series", "max_series", max, "left_out", len(newly), "first", newly[0])
	}
	st.kept, st.dropped = kept, dropped
	slices.SortFunc(out.Allocations, comparePodAllocations)
	out.DroppedTotal = st.droppedTotal
	return out
}

func comparePodAllocations(a, b PodAllocation) int {
	return cmp.Or(cmp.Compare(a.GPU, b.GPU), compareInstance(a.GPUInstance, b.GPUInstance),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container))
}

// compareInstance orders GPU instance IDs as numbers ("" first).
func compareInstance(a, b string) int {
	ai, e1 := strconv.Atoi(a)
	bi, e2 := strconv.Atoi(b)
	if e1 == nil && e2 == nil {
		return cmp.Compare(ai, bi)
	}
	return cmp.Compare(a, b)
}

// podPlace is a pod on a device.
type podPlace struct {
	devicePlace
	namespace, pod string
}

// processTenants is the tenant the processes of each pod on each device
// were attributed to; "" where they went to several.
func processTenants(usage []Usage) map[podPlace]string {
	out := map[podPlace]string{}
	for i := range usage {
		u := &usage[i]
		for _, w := range u.Workloads {
			if w.Pod == nil {
				continue
			}
			k := podPlace{devicePlace{u.GPU, u.UUID, u.GPUInstance}, w.Pod.Namespace, w.Pod.Name}
			if t, ok := out[k]; ok && t != u.Tenant {
				out[k] = ""
				continue
			}
			out[k] = u.Tenant
		}
	}
	return out
}

// podTenant is the tenant of pod on the device at pl by the selectors
// alone (a conflict is Unassigned, and neither counted nor logged here:
// the attribution of the device's processes and instances does that).
func (b *Builder) podTenant(compiled *compiledConfig, pl deviceAt, pod kube.PodRef) string {
	sub := &subject{uid: -1, gpu: pl.gpu, gi: -1, migUUID: pl.migUUID, pod: &pod}
	if pl.gi != "" {
		sub.gi, _ = strconv.Atoi(pl.gi)
	}
	hits := compiled.matching(sub)
	switch len(hits) {
	case 0:
		return compiled.pods.tenantOf(&pod)
	case 1:
		return hits[0]
	}
	return Unassigned
}
