package nvml

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// relayoutSnapshot is GPU 0 of b's readings at now with two latency
// tenants, a in the first MIG instance and b in the second, whose work
// keeps 12 and 37 SMs busy, and b missing its SLO (reqs requests so far,
// a tenth of them good).
func relayoutSnapshot(t *testing.T, b *Backend, now time.Time, reqs float64) (*tenant.Snapshot, []string) {
	t.Helper()
	rd := sample(t, b)
	d := rd.Devices[0]
	if len(d.MIG) != 2 {
		t.Fatalf("MIG instances %+v, want two", d.MIG)
	}
	var layout []string
	var usage []tenant.Usage
	for i, name := range []string{"a", "b"} {
		m := &d.MIG[i]
		layout = append(layout, m.Profile)
		busy := []float64{12, 37}[i] / float64(m.SMCount)
		m.Activity.SMActive = gpu.Float(busy)
		pid := uint32(i + 1)
		d.Processes = append(d.Processes, gpu.Process{PID: pid, GPUInstanceID: m.GPUInstanceID})
		usage = append(usage, tenant.Usage{Tenant: name, Class: gpu.ClassLatency, UUID: d.UUID, GPUInstance: strconv.Itoa(m.GPUInstanceID),
			PIDs: []uint32{pid}, MemoryUsedBytes: 6 << 30, SMActive: gpu.Float(busy)})
	}
	snap := tunertest.Snapshot(now, []gpu.Device{d}, usage)
	snap.Tenants = []tenant.Info{{Name: "a", Priority: 5}, {Name: "b", Priority: 5}}
	slo := latency.Status{Quantile: 0.95, TargetSeconds: 0.008, GoodKnown: true}
	snap.SLOs = []tenant.SLOStatus{{Tenant: "a", Status: slo}, {Tenant: "b", Status: slo}}
	snap.SLOs[1].RequestsTotal, snap.SLOs[1].GoodRequestsTotal = reqs, 0.1*reqs
	return snap, layout
}

// A MIG relayout the slow loop plans on the NVML backend's readings and
// the tuner carries out (drain, set, start) through ConfigureMIG: the
// layouts it decides from and to are named as the backend serves them,
// the driver's own names where it gives them (3g.72gb+gfx, not the
// 3g.71gb+gfx built from slices and memory), so that the layout read
// after is, name for name, the one the decision says was set. The tuner
// compares no layout it holds with a layout read; were a plan named
// otherwise than the readings, the decision would report a layout never
// read, and the planner, seeing the GPU as it should be after, would not
// plan again (one relayout in ten rounds, the planner's hold and
// cool-down a minute).
func TestMIGRelayoutThroughTheTunerNamesAsServed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		driver   map[int]string // the driver's v3 names by profile index; nil: no v3 info
		from, to string
	}{
		{"driver's names differ from the built ones",
			map[int]string{nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX: "MIG 3g.72gb+gfx", nvml.GPU_INSTANCE_PROFILE_1_SLICE: "MIG 1g.24gb"},
			"[3g.72gb+gfx, 1g.24gb]", "[1g.24gb, 3g.72gb+gfx]"},
		{"no v3 info: the built names", nil, "[3g.71gb+gfx, 1g.24gb]", "[1g.24gb, 3g.71gb+gfx]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, rtxProServer(t))
			if tc.driver != nil {
				f.driverGINames(0, tc.driver)
			}
			f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
			b := f.backend()
			host := &tunertest.MIGHost{} // drains and starts; b sets the layout
			planner := rebalance.Default()
			planner.CoolDown, planner.Hold = time.Minute, time.Minute
			tu, err := tuner.New(tuner.Options{Policy: onePolicy(nil), Clock: f.clock, Mode: tuner.ModeEnforce,
				Actuators: tuner.ActuatorsOf(b, host), Rebalance: planner, Guards: tuner.DefaultGuards(nil, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			note := func(decs []tuner.Decision) {
				for _, d := range decs {
					if d.Knob == gpu.KnobMIGLayout {
						got = append(got, fmt.Sprintf("%s->%s %s", d.From, d.To, d.Outcome))
					}
				}
			}
			var layouts []string
			for i := range 10 {
				snap, layout := relayoutSnapshot(t, b, f.clock.Now(), float64(48000*(i+1)))
				layouts = append(layouts, tuner.LayoutOf(layout).String())
				decs, err := tu.RunOnce(context.Background(), snap)
				if err != nil {
					t.Fatal(err)
				}
				note(decs)
				f.clock.Advance(time.Second)
				note(tu.Progress(context.Background()))
				f.clock.Advance(time.Minute - time.Second)
			}
			if want := tc.from + "->" + tc.to + " " + string(tuner.OutcomeApplied); len(got) != 1 || got[0] != want {
				t.Fatalf("MIG layout decisions %q, want one: %q", got, want)
			}
			if last := layouts[len(layouts)-1]; layouts[0] != tc.from || last != tc.to {
				t.Errorf("layouts read %v, want %s first and %s last", layouts, tc.from, tc.to)
			}
			if calls := strings.Join(host.Calls, " "); !strings.Contains(calls, "start 1 start 2") || strings.Contains(calls, "configure") {
				t.Errorf("drain and start calls %q, want both processes started and the layout set by NVML", calls)
			}
		})
	}
}
