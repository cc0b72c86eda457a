package tenant

import (
	"slices"
	"testing"
	"time"

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

// Across a MIG relayout: the GPU's context switches in MIG mode are no
// tenant's (not per instance), yet its baseline was moved on only on a
// whole GPU, so the first whole-GPU sample after the MIG period gave its
// tenants every switch of that period; and the counts kept of tenants
// without usage were served on the MIG GPU. Now the MIG period's switches
// are dropped and no count is served while the GPU is in MIG mode (kept:
// the tenants back count on from it).
func TestContextSwitchesAcrossMIGRelayout(t *testing.T) {
	const tenants = "tenants:\n  - {name: chat, selectors: [{executable: vllm}]}\n  - {name: batch, selectors: [{executable: train}]}\n"
	b := mustBuilder(t, tenants, BuilderOptions{})
	whole := func(sec int64, cs uint64) *gpu.Readings {
		return &gpu.Readings{Time: time.Unix(sec, 0), Interval: time.Second, Devices: []gpu.Device{{
			Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, ContextSwitchesTotal: gpu.Uint(cs),
			Activity: gpu.Activity{SMActive: gpu.Float(0.8)},
			Processes: []gpu.Process{
				{PID: 1, Name: "vllm", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.5)},
				{PID: 2, Name: "train", UID: -1, GPUInstanceID: -1, SMUtil: gpu.Float(0.5)},
			}}}}
	}
	b.Build(whole(100, 1000), gpu.SamplerStats{})
	s := b.Build(whole(101, 1100), gpu.SamplerStats{})
	before := *usageOf(t, s, "chat", "").ContextSwitchesTotal
	cs := uint64(1100)
	for sec := int64(102); sec < 105; sec++ { // MIG mode: chat in instance 1, batch gone
		cs += 10000
		r := migDevice(sec, 0.7, 0, migProc(1, "vllm", 1, 20*gib))
		r.Devices[0].ContextSwitchesTotal = gpu.Uint(cs)
		if s = b.Build(r, gpu.SamplerStats{}); len(s.KeptContextSwitches) != 0 {
			t.Errorf("MIG mode: counts served %+v, want none", s.KeptContextSwitches)
		}
	}
	s = b.Build(whole(105, cs+100), gpu.SamplerStats{})
	after := *usageOf(t, s, "chat", "").ContextSwitchesTotal
	if d := after - before; !near(d, 50) {
		t.Errorf("first whole-GPU sample after MIG: chat +%v, want +50 (its half of the sample's 100)", d)
	}
}
