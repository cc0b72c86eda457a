package oracle

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The schedule decides each phase's settings at the first round at or
// after the phase's start, only those that differ from what was applied
// (State.Changes) or from the default where nothing was: an MPS fraction
// with a restart for the client's tenant, a time slice, a MIG layout as a
// relayout plan, the SM clock locked at its maximum or unlocked.
func TestScheduleDecides(t *testing.T) {
	t0 := simrun.Start
	mpsKey := func(pid uint32) string {
		return tuner.Target{GPU: "GPU-0", Knob: gpu.KnobMPSActiveThreads, PID: pid}.String()
	}
	phases := func(gs ...gpuSetting) []phase {
		var out []phase
		for i, g := range gs {
			out = append(out, phase{Start: time.Duration(i) * time.Minute, End: time.Duration(i+1) * time.Minute, GPUs: []gpuSetting{g}})
		}
		return out
	}
	tests := []struct {
		name    string
		phases  []phase
		changes map[string]tuner.Change // applied before the first round
		rounds  []time.Duration
		want    []string
	}{
		{"defaults are not decided", phases(gpuSetting{Caps: map[uint32]float64{11: 1, 12: 1}, TimeSlice: gpu.TimeSliceDefault}),
			nil, []time.Duration{0}, nil},
		{"first phase at the first round", phases(gpuSetting{Caps: map[uint32]float64{11: 0.5, 12: 1}, Lock: true}),
			nil, []time.Duration{0},
			[]string{"0s GPU-0/mps_active_threads/pid11 (chat) 100%->50% restart", "0s GPU-0/locked_clocks 1980 unlocked->1980-1980MHz"}},
		{"a later phase at its start, not before", phases(gpuSetting{}, gpuSetting{Caps: map[uint32]float64{12: 0.3}, TimeSlice: gpu.TimeSliceLong}),
			nil, []time.Duration{0, 30 * time.Second, time.Minute, 90 * time.Second},
			[]string{"1m0s GPU-0/mps_active_threads/pid12 (pid 12) 100%->30% restart", "1m0s GPU-0/compute_timeslice long default->long"}},
		{"what was applied is not decided again", phases(gpuSetting{Caps: map[uint32]float64{11: 0.5}, Lock: true}, gpuSetting{Caps: map[uint32]float64{11: 0.5}}),
			map[string]tuner.Change{mpsKey(11): {To: tuner.Fraction(0.5)}}, []time.Duration{0, time.Minute},
			[]string{"0s GPU-0/locked_clocks 1980 unlocked->1980-1980MHz"}},
		{"what was not applied is decided again", phases(gpuSetting{Caps: map[uint32]float64{11: 0.5}}, gpuSetting{Caps: map[uint32]float64{11: 0.5}}),
			nil, []time.Duration{0, time.Minute},
			[]string{"0s GPU-0/mps_active_threads/pid11 (chat) 100%->50% restart", "1m0s GPU-0/mps_active_threads/pid11 (chat) 100%->50% restart"}},
		{"a relayout", phases(gpuSetting{Layout: []string{"1g.10gb", "3g.40gb"}}),
			nil, []time.Duration{0}, []string{"0s GPU-0/mig_layout [1g.10gb, 3g.40gb] plan GPU-0 [1g.10gb 3g.40gb]"}},
		{"two phases due in one round", phases(gpuSetting{Caps: map[uint32]float64{11: 0.5}}, gpuSetting{Caps: map[uint32]float64{11: 0.5}}),
			nil, []time.Duration{2 * time.Minute}, []string{"2m0s GPU-0/mps_active_threads/pid11 (chat) 100%->50% restart"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newSchedule(&Plan{Phases: tc.phases, maxMHz: []uint32{1980}})
			var got []string
			for _, at := range tc.rounds {
				snap := &tenant.Snapshot{Time: t0.Add(at),
					Readings: &gpu.Readings{Devices: []gpu.Device{{UUID: "GPU-0", Processes: []gpu.Process{{PID: 11}, {PID: 12}}}}},
					Usage:    []tenant.Usage{{Tenant: "chat", UUID: "GPU-0", PIDs: []uint32{11}}}}
				for _, a := range o.Decide(&tuner.State{Now: snap.Time, Snapshot: snap, Changes: tc.changes}) {
					got = append(got, actionText(at, a))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("actions\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func actionText(at time.Duration, a tuner.Action) string {
	s := fmt.Sprintf("%v %s", at, a.Target)
	switch {
	case a.Tenant != "":
		s += " (" + a.Tenant + ")"
	case a.Knob == gpu.KnobComputeTimeSlice:
		s += " " + a.Want.String()
	case a.Knob == gpu.KnobLockedClocks:
		s += " 1980"
	}
	if a.Current != nil {
		s += " " + a.Current.String() + "->" + a.Want.String()
	} else {
		s += " " + a.Want.String()
	}
	if a.Restart {
		s += " restart"
	}
	if a.Plan != nil {
		for _, l := range a.Plan.MIG {
			s += fmt.Sprintf(" plan %s %v", l.UUID, l.Profiles)
		}
	}
	return s
}

// A relayout of the plan runs on the tuner's executor as autotune's does:
// every instance drained, the layout set once they are empty, the
// processes started again; it is two changes (the drain and the layout),
// the processes' starts part of the layout's.
func TestScheduleRelayoutOnTheEngine(t *testing.T) {
	sc, err := sim.ParseScenario("m.yaml", []byte(`name: m
gpus: [{model: H100-SXM5-80GB, sharing: mig, mig: [{profile: 3g.40gb}, {profile: 1g.10gb}]}]
tenants:
  - {name: a, mig_instance: 0, memory: 6GiB, workload: {type: training, flops: 1e12}}
  - {name: b, mig_instance: 1, memory: 6GiB, workload: {type: training, flops: 1e12}}
`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := simrun.NewHost(sc, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	snaps := simrun.NewSnapshots(h, time.Second)
	act := tuner.ActuatorsOf(h.Sim)
	pol := policy(&Plan{Phases: []phase{{End: time.Minute, GPUs: []gpuSetting{{Layout: []string{"1g.10gb", "3g.40gb"}}}}}})
	snap, err := snaps.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.Init(ctx, act, snap); err != nil {
		t.Fatal(err)
	}
	var decs []tuner.Decision
	for i := 0; i < 60 && (i == 0 || pol.Tuner().Underway()); i++ {
		h.AdvanceTo(h.Sim.Now().Add(time.Second))
		if snap, err = snaps.Take(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := pol.Observe(ctx, act, snap)
		if err != nil {
			t.Fatal(err)
		}
		decs = append(decs, d...)
	}
	var got []string
	for _, d := range decs {
		got = append(got, fmt.Sprintf("%s %v", d.Knob, d.Applied))
	}
	if want := []string{"mig_drain true", "mig_layout true"}; !slices.Equal(got, want) {
		t.Errorf("decisions %q, want %q", got, want)
	}
	dev := snap.Readings.Devices[0]
	var profiles []string
	for _, m := range dev.MIG {
		profiles = append(profiles, m.Profile)
	}
	if want := []string{"1g.10gb", "3g.40gb"}; !slices.Equal(profiles, want) {
		t.Errorf("layout %v, want %v", profiles, want)
	}
	if len(dev.Processes) != 2 {
		t.Errorf("%d processes after the relayout, want both started again", len(dev.Processes))
	}
}
