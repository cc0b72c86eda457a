package sim

import (
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

// unreadArrivalKey refuses a key of arrival that its process does not read
// (burst_rate with poisson, rate with trace, any with training's closed
// loop): the run would go on as if it were not there. A key written in
// the file counts whatever its value (speedup: 0 with poisson too).
func (p *parser) unreadArrivalKey(a *ArrivalSpec, at func(...any) []any) error {
	key, readBy := unreadArrival(a, func(key string) bool { return yamlconf.Has(p.root, at("arrival", key)...) })
	switch {
	case key == "":
		return nil
	case a.Process == "closed":
		return p.errAt(at("arrival", key), "arrival.%s is for process %s; training runs closed-loop and reads no arrival", key, readBy)
	}
	return p.errAt(at("arrival", key), "arrival.%s is for process %s; process %s does not read it", key, readBy, a.Process)
}

// unreadArrival returns the first key given to a (set to other than its
// zero, or written, as written says) that its process does not read, with
// the processes that read it; "" when there is none.
func unreadArrival(a *ArrivalSpec, written func(key string) bool) (key, readBy string) {
	for _, k := range []struct {
		key    string
		given  bool
		readBy []string
	}{
		{"rate", a.Rate != 0, []string{"poisson", "bursty"}},
		{"burst_rate", a.BurstRate != 0, []string{"bursty"}},
		{"burst_mean", a.BurstMean != 0, []string{"bursty"}},
		{"calm_mean", a.CalmMean != 0, []string{"bursty"}},
		{"file", a.File != "", []string{"trace"}},
		{"speedup", a.Speedup != 0, []string{"trace"}},
		{"no_loop", a.NoLoop, []string{"trace"}},
	} {
		if (k.given || written(k.key)) && !slices.Contains(k.readBy, a.Process) {
			return k.key, strings.Join(k.readBy, " or ")
		}
	}
	return "", ""
}

// gpuKeyReaders are the sharing modes that read each GPU key a sharing mode
// may leave unread: an MPS GPU's clients run concurrently (no time slice),
// a vGPU host slices by its vgpu: scheduler, and neither becomes a MIG GPU
// (ConfigureMIG refuses them) or another mode. mps: is read by an MPS GPU
// and by the MPS instances of a MIG layout (ConfigureMIG's instances are
// time-sliced: a time-sliced GPU never has one).
var gpuKeyReaders = []struct {
	key     string
	readers []gpu.SharingMode
}{
	{"timeslice", []gpu.SharingMode{gpu.SharingTimeSlice, gpu.SharingExclusive, gpu.SharingMIG}},
	{"mig_drain_time", []gpu.SharingMode{gpu.SharingTimeSlice, gpu.SharingExclusive, gpu.SharingMIG}},
	{"mps", []gpu.SharingMode{gpu.SharingMPS, gpu.SharingMIG}},
	{"vgpu", []gpu.SharingMode{gpu.SharingVGPU}},
}

// unreadGPUKey refuses a key given to GPU i that its sharing mode never
// reads (timeslice on an MPS GPU, vgpu: on a time-sliced one): the run
// would go on as if it were not there.
func (p *parser) unreadGPUKey(g *GPUSpec, at func(...any) []any) error {
	for _, k := range gpuKeyReaders {
		if slices.Contains(k.readers, gpu.SharingMode(g.Sharing)) || !yamlconf.Has(p.root, at(k.key)...) {
			continue
		}
		names := make([]string, len(k.readers))
		for j, r := range k.readers {
			names[j] = string(r)
		}
		return p.errAt(at(k.key), "%s is for sharing %s; a GPU with sharing: %s does not read it", k.key, strings.Join(names, ", "), g.Sharing)
	}
	return nil
}

// unreadTenantKey refuses a key given to tenant t (on GPU g) that no run
// of the scenario reads: vm: off a vGPU host (a VM never moves to or from
// one); mps_active_threads and pinned_memory_limit, a client's own MPS
// settings, where no GPU or MIG instance of the scenario runs MPS (a
// tenant elsewhere may move to one, where they apply); qos, container_id
// and pod_uid beside cgroup, which is the path they would build.
func (p *parser) unreadTenantKey(sc *Scenario, t *TenantSpec, g *GPUSpec, at func(...any) []any) error {
	if g.Sharing != string(gpu.SharingVGPU) && yamlconf.Has(p.root, at("vm")...) {
		return p.errAt(at("vm"), "vm is for a tenant on a GPU with sharing: vgpu; a tenant on a GPU with sharing: %s has no VM", g.Sharing)
	}
	if !slices.ContainsFunc(sc.GPUs, runsMPS) {
		for _, key := range []string{"mps_active_threads", "pinned_memory_limit"} {
			if yamlconf.Has(p.root, at(key)...) {
				return p.errAt(at(key), "%s is an MPS client's; no GPU or MIG instance of this scenario runs MPS (sharing: mps), so no run reads it", key)
			}
		}
	}
	if t.Process.Cgroup != "" {
		for _, key := range []string{"qos", "container_id", "pod_uid"} {
			if yamlconf.Has(p.root, at("process", key)...) {
				return p.errAt(at("process", key), "process.%s builds the cgroup path, which process.cgroup gives as it is: it is not read beside it", key)
			}
		}
	}
	return nil
}

// runsMPS says whether g, or one of its MIG instances, runs MPS.
func runsMPS(g GPUSpec) bool {
	return g.Sharing == string(gpu.SharingMPS) || slices.ContainsFunc(g.MIG, func(m MIGSpec) bool { return m.Sharing == string(gpu.SharingMPS) })
}
