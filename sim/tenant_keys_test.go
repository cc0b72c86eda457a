package sim

import (
	"testing"
)

// TestPinnedLimitApplied: a tenant's pinned_memory_limit is its MPS
// client's limit from its first context: over it, the context fails with
// an OOM (it was parsed and never applied, so the client ran); a limit of
// 0 leaves the GPU's default, and off MPS there is none.
func TestPinnedLimitApplied(t *testing.T) {
	const src = `name: pin
gpus:
  - {model: H100-SXM5-80GB, sharing: mps}
  - {model: H100-SXM5-80GB}
tenants:
  - {name: over, memory: 20GiB, pinned_memory_limit: 1GiB, workload: {type: training, flops: 1e12}}
  - {name: within, memory: 2GiB, pinned_memory_limit: 4GiB, workload: {type: training, flops: 1e12}}
  - {name: default, memory: 2GiB, pinned_memory_limit: 0, workload: {type: training, flops: 1e12}}
  - {name: off-mps, gpu: 1, memory: 20GiB, pinned_memory_limit: 1GiB, workload: {type: training, flops: 1e12}}
`
	s := mustNew(t, mustParse(t, src), Options{})
	s.AdvanceTo(s.Now().Add(2e9))
	w := s.Window()
	for i, want := range []int{1, 0, 0, 0} {
		if got := w.Tenants[i].OOMs; got != want {
			t.Errorf("%s: %d OOMs, want %d", w.Tenants[i].Tenant, got, want)
		}
	}
}

// TestUnreadTenantKeyRefused: a tenant key that no run of the scenario
// reads is refused at its line, naming it (each loaded and did nothing):
// vm: off a vGPU host; a client's MPS settings where nothing runs MPS;
// qos, container_id, pod_uid beside cgroup. Where a run may read them
// they load.
func TestUnreadTenantKeyRefused(t *testing.T) {
	const dnn = "workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}"
	scenario := func(gpus, tenant string) string {
		return "name: x\ngpus:\n" + gpus + "tenants:\n  - {name: a, " + tenant + dnn + "}\n"
	}
	const (
		ts    = "  - {model: H100-SXM5-80GB}\n"
		mps   = "  - {model: H100-SXM5-80GB, sharing: mps}\n"
		vgpu  = "  - {model: H100-SXM5-80GB, sharing: vgpu}\n"
		migMP = "  - {model: H100-SXM5-80GB, sharing: mig, mig: [{profile: 7g.80gb, sharing: mps}]}\n"
	)
	for _, c := range []struct{ name, src, want string }{
		{"vm on a time-sliced GPU", scenario(ts, "vm: {weight: 2}, "), "x.yaml:5: vm is for a tenant on a GPU with sharing: vgpu; a tenant on a GPU with sharing: time-slice has no VM"},
		{"vm name on an MPS GPU", scenario(mps, "vm: {name: v}, "), "x.yaml:5: vm is for a tenant on a GPU with sharing: vgpu"},
		{"vm on a vGPU host", scenario(vgpu, "vm: {weight: 2}, "), ""},
		{"mps_active_threads with no MPS", scenario(ts, "mps_active_threads: 0.5, "), "x.yaml:5: mps_active_threads is an MPS client's; no GPU or MIG instance of this scenario runs MPS"},
		{"pinned_memory_limit with no MPS", scenario(ts, "pinned_memory_limit: 1GiB, "), "x.yaml:5: pinned_memory_limit is an MPS client's"},
		{"mps_active_threads on MPS", scenario(mps, "mps_active_threads: 0.5, "), ""},
		{"mps_active_threads in a MIG instance of MPS", scenario(migMP, "mig_instance: 0, mps_active_threads: 0.5, "), ""},
		{"mps_active_threads where a move may take it to MPS", scenario(ts+mps, "mps_active_threads: 0.5, "), ""},
		{"qos beside cgroup", scenario(ts, "process: {cgroup: /system.slice/foo.service, qos: guaranteed}, "), "x.yaml:5: process.qos builds the cgroup path, which process.cgroup gives as it is"},
		{"container_id beside cgroup", scenario(ts, "process: {cgroup: /a, container_id: NOT-HEX}, "), "x.yaml:5: process.container_id builds the cgroup path"},
		{"pod_uid beside cgroup", scenario(ts, "process: {cgroup: /a, pod_uid: 3b8d0f26-4c5e-4a7b-9d2f-6e0c1a3b5d01}, "), "x.yaml:5: process.pod_uid builds the cgroup path"},
		{"qos without cgroup", scenario(ts, "process: {qos: guaranteed}, "), ""},
		{"cgroup alone", scenario(ts, "process: {cgroup: /system.slice/foo.service}, "), ""},
	} {
		t.Run(c.name, func(t *testing.T) { wantParse(t, c.src, c.want) })
	}
}
