package tenant

import (
	"slices"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A tenant whose processes leave a GPU keeps its context-switch count in
// the snapshot (KeptContextSwitches), so the tenants of the GPU still add
// up to the GPU's context switches since the first sample; the count goes
// on from there when it comes back; none is kept on a GPU not read (lost)
// or without the counter.
func TestKeptContextSwitches(t *testing.T) {
	b := mustBuilder(t, sharedTenants, BuilderOptions{})
	without := func(cs uint64, pid uint32) *gpu.Readings {
		r := sharedReadings(gpu.SharingTimeSlice, cs)
		d := &r.Devices[0]
		d.Processes = slices.DeleteFunc(d.Processes, func(p gpu.Process) bool { return p.PID == pid })
		return r
	}
	total := func(s *Snapshot) float64 {
		sum := 0.0
		for _, u := range s.Usage {
			if u.ContextSwitchesTotal != nil {
				sum += *u.ContextSwitchesTotal
			}
		}
		for _, k := range s.KeptContextSwitches {
			sum += k.Total
		}
		return sum
	}
	b.Build(sharedReadings(gpu.SharingTimeSlice, 1000), gpu.SamplerStats{})
	s := b.Build(sharedReadings(gpu.SharingTimeSlice, 1600), gpu.SamplerStats{})
	train := *usageOf(t, s, "train", "").ContextSwitchesTotal
	if len(s.KeptContextSwitches) != 0 || !near(total(s), 600) {
		t.Fatalf("every tenant present: kept %+v, total %v (want 600)", s.KeptContextSwitches, total(s))
	}

	lost := without(2000, 3) // train's process gone
	s = b.Build(lost, gpu.SamplerStats{})
	want := []KeptCount{{Tenant: "train", Class: gpu.ClassBatch, GPU: 0, UUID: "GPU-0", Total: train}}
	if !slices.Equal(s.KeptContextSwitches, want) {
		t.Errorf("train gone: kept %+v, want %+v", s.KeptContextSwitches, want)
	}
	if !near(total(s), 1000) {
		t.Errorf("train gone: the tenants add up to %v, want the GPU's 1000", total(s))
	}

	down := without(2000, 3)
	down.Devices[0].Up = false
	if s = b.Build(down, gpu.SamplerStats{}); len(s.KeptContextSwitches) != 0 {
		t.Errorf("GPU lost: kept %+v, want none", s.KeptContextSwitches)
	}
	none := without(2000, 3)
	none.Devices[0].ContextSwitchesTotal = nil
	if s = b.Build(none, gpu.SamplerStats{}); len(s.KeptContextSwitches) != 0 {
		t.Errorf("GPU without the counter: kept %+v, want none", s.KeptContextSwitches)
	}

	s = b.Build(sharedReadings(gpu.SharingTimeSlice, 2000), gpu.SamplerStats{})
	if len(s.KeptContextSwitches) != 0 {
		t.Errorf("train back: kept %+v, want none", s.KeptContextSwitches)
	}
	checkF(t, "train back", usageOf(t, s, "train", "").ContextSwitchesTotal, train)
}

// A tenant served a count of 0 keeps its series at 0 when it leaves, as a
// tenant with switches counted keeps its count (on an MPS GPU, which
// counts none in the simulator, every tenant's count is 0).
func TestKeptContextSwitchesAtZero(t *testing.T) {
	b := mustBuilder(t, sharedTenants, BuilderOptions{})
	b.Build(mpsReadings(0), gpu.SamplerStats{})
	s := b.Build(mpsReadings(0), gpu.SamplerStats{})
	if cs := usageOf(t, s, "train", "").ContextSwitchesTotal; cs == nil || *cs != 0 {
		t.Fatalf("train present: context switches %v, want a served 0", cs)
	}
	gone := mpsReadings(0)
	d := &gone.Devices[0]
	d.Processes = slices.DeleteFunc(d.Processes, func(p gpu.Process) bool { return p.PID == 3 })
	s = b.Build(gone, gpu.SamplerStats{})
	want := []KeptCount{{Tenant: "train", Class: gpu.ClassBatch, GPU: 0, UUID: "GPU-0", Total: 0}}
	if !slices.Equal(s.KeptContextSwitches, want) {
		t.Errorf("train gone: kept %+v, want %+v", s.KeptContextSwitches, want)
	}
}
