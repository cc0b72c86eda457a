package tenant

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// churnPods is a PodMapper whose mapping, and whether its latest query of
// the pod-resources API (down) or the pod metadata (metaDown) failed, the
// test sets between samples.
type churnPods struct {
	m              atomic.Pointer[kube.Mapping]
	down, metaDown atomic.Bool
}

func (p *churnPods) Start(context.Context)   {}
func (p *churnPods) Wait()                   {}
func (p *churnPods) Refresh(context.Context) {}
func (p *churnPods) Mapping() *kube.Mapping  { return p.m.Load() }
func (p *churnPods) Status() kube.Status {
	return kube.Status{Up: !p.down.Load(), Metadata: kube.MetadataStatus{Source: "pods.json", Up: !p.metaDown.Load()}}
}

// churnReadings is sample i, every step, of GPU-0 (time-sliced, with an
// energy and a context-switch counter) running the pods named.
func churnReadings(i int, step time.Duration, pods ...string) *gpu.Readings {
	var procs []gpu.Process
	for j, name := range pods {
		procs = append(procs, podProc(uint32(100+j), name, 0.3))
	}
	d := testutil.Device(0, "GPU-0", procs...)
	d.Mode = gpu.SharingTimeSlice
	d.Activity.SMActive = gpu.Float(0.6)
	d.EnergyJoules = gpu.Float(float64(i) * 100)
	d.ContextSwitchesTotal = gpu.Uint(uint64(i) * 10)
	return &gpu.Readings{Time: time.Unix(1000, 0).Add(time.Duration(i) * step), Interval: step, Devices: []gpu.Device{d}}
}

// TestDepartedTenantsBounded drives a batch job a step through one GPU,
// each its own tenant (--tenants.kubernetes-default=namespace, a namespace
// a job), beside a service that stays: the meters and context-switch
// counts kept for the jobs that left stay bounded by the retention and
// the cap, where they grew by one a job.
func TestDepartedTenantsBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		step      time.Duration
		steps     int
		retention time.Duration
		failing   bool // the kubelet's pod-resources API fails all along
		// at the end: meters, context-switch counts kept for jobs that left,
		// context-switch counts in all (the first sample counts none)
		wantMeters, wantKept, wantCS int
	}{
		{"kept forever (retention 0)", time.Minute, 200, 0, false, 201, 198, 200},
		{"a job a minute, 1h retention", time.Minute, 600, time.Hour, false, 61, 59, 61},
		{"a job a second, 1h retention: the cap", time.Second, 600, time.Hour, false, 2 + MaxDepartedPerGPU, MaxDepartedPerGPU, 2 + MaxDepartedPerGPU},
		// the jobs are not known to have left, but the cap holds
		{"a job a minute, the kubelet failing: the cap", time.Minute, 600, time.Hour, true, 2 + MaxDepartedPerGPU, MaxDepartedPerGPU, 2 + MaxDepartedPerGPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &churnPods{}
			pods.down.Store(tc.failing)
			b := mustBuilder(t, "", BuilderOptions{Pods: pods, PodTenancy: PodTenancy{ByNamespace: true}, DepartedRetention: tc.retention})
			var s *Snapshot
			for i := range tc.steps {
				job := fmt.Sprintf("job-%d", i)
				pods.m.Store(podsOn(t, "svc/web=GPU-0::1", job+"/"+job+"=GPU-0::2"))
				s = b.Build(churnReadings(i, tc.step, "web", job), gpu.SamplerStats{})
			}
			if len(s.Meters) != tc.wantMeters || len(s.KeptContextSwitches) != tc.wantKept {
				t.Errorf("%d meters and %d kept context-switch counts, want %d and %d", len(s.Meters), len(s.KeptContextSwitches), tc.wantMeters, tc.wantKept)
			}
			if len(b.meters.tenants) != tc.wantMeters || len(b.attr.csAcc) != tc.wantCS {
				t.Errorf("state: %d meters and %d context-switch counts, want %d and %d", len(b.meters.tenants), len(b.attr.csAcc), tc.wantMeters, tc.wantCS)
			}
		})
	}
}

// meterOf is tenant's meter on GPU-0 in s, nil without one.
func meterOf(s *Snapshot, tenant string) *Meter {
	for i := range s.Meters {
		if s.Meters[i].Tenant == tenant && s.Meters[i].UUID == "GPU-0" {
			return &s.Meters[i]
		}
	}
	return nil
}

// keptOf is tenant's kept context-switch count on GPU-0 in s, nil without one.
func keptOf(s *Snapshot, tenant string) *KeptCount {
	for i := range s.KeptContextSwitches {
		if k := &s.KeptContextSwitches[i]; k.Tenant == tenant && k.UUID == "GPU-0" {
			return k
		}
	}
	return nil
}

// TestDepartedMetersForgotten: with a 1h retention and a sample every 10
// minutes, a job (a tenant of its own) that leaves a GPU after the sample
// at "left" keeps its meters and context-switch count until "gone", one
// hour of samples without usage later, not counting the time the GPU was
// lost; then they are forgotten, the GPU's meters untouched, so that the
// tenants and idle add up to the GPU's energy less what the job had; back,
// it starts at 0.
func TestDepartedMetersForgotten(t *testing.T) {
	const step = 10 * time.Minute
	for _, tc := range []struct {
		name       string
		left       int    // the job's last sample with usage
		down       [2]int // samples in which the GPU is lost: [from, to)
		gone, back int
	}{
		{"gone an hour after it left", 2, [2]int{}, 8, 10},
		{"the time the GPU is lost does not count", 2, [2]int{3, 20}, 25, 26},
		// lost once, 40 minutes after it left: those 40 minutes count
		{"the time before the GPU is lost counts", 2, [2]int{6, 7}, 9, 10},
		{"lost for one sample, 20 minutes after it left", 2, [2]int{4, 5}, 9, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &churnPods{}
			b := mustBuilder(t, "", BuilderOptions{Pods: pods, PodTenancy: PodTenancy{ByNamespace: true}, DepartedRetention: time.Hour})
			var first *Meter
			var firstCS float64
			for i := 0; i <= tc.back; i++ {
				names := []string{"web"}
				if i <= tc.left || i == tc.back {
					names = append(names, "job")
					pods.m.Store(podsOn(t, "svc/web=GPU-0::1", "batch/job=GPU-0::2"))
				} else {
					pods.m.Store(podsOn(t, "svc/web=GPU-0::1"))
				}
				r := churnReadings(i, step, names...)
				if i >= tc.down[0] && i < tc.down[1] {
					r.Devices[0].Up = false
				}
				s := b.Build(r, gpu.SamplerStats{})
				job, kept := meterOf(s, "batch"), keptOf(s, "batch")
				switch {
				case i == 1:
					first, firstCS = job, *usageOf(t, s, "batch", "").ContextSwitchesTotal
				case i == tc.gone-1:
					if job == nil || kept == nil {
						t.Errorf("sample %d, within the hour: meter %v, context switches %v; want both kept", i, job, kept)
					}
				case i == tc.gone:
					if job != nil || kept != nil {
						t.Errorf("sample %d, an hour after it left: meter %+v, context switches %+v; want both forgotten", i, job, kept)
					}
					var tenants float64
					for _, m := range s.Meters {
						tenants += m.EnergyJoules
					}
					g := s.GPUMeters[0]
					// the job had all it ever had at the sample after it left
					if want := g.EnergyJoules - first.EnergyJoules*float64(tc.left); !near(tenants+g.IdleEnergyJoules, want) {
						t.Errorf("sample %d: tenants %v + idle %v, want the GPU's %v less the job's", i, tenants, g.IdleEnergyJoules, want)
					}
				case i == tc.back:
					if job == nil || !near(job.EnergyJoules, first.EnergyJoules) || !near(job.GPUSecondsUsed, first.GPUSecondsUsed/2) {
						// first: its first two samples' GPU time, the second's energy
						t.Errorf("back: meter %+v, want it started again at 0: one sample's energy and half the GPU time of %+v", job, first)
					}
					checkF(t, "back: context switches", usageOf(t, s, "batch", "").ContextSwitchesTotal, firstCS)
				}
			}
		})
	}
}

// TestDepartedWhilePodSourceFails: with a 1h retention and a sample every
// 10 minutes, the time in which the pod mapping's source fails (the
// kubelet's pod-resources API, or the pod metadata that labels come from)
// does not count toward a tenant's departure when its usage rests on that
// mapping: its job's pod, started again meanwhile, is in no mapping and
// its usage goes to Unassigned, but it has not left. Back in the mapping,
// its meters count on from where they were; the time before and after the
// failure counts. A tenant matched by its executable is forgotten on time.
func TestDepartedWhilePodSourceFails(t *testing.T) {
	const step = 10 * time.Minute
	const file = `tenants:
- name: jobs
  selectors: [{kubernetes: {namespace: batch}}]
- name: render
  selectors: [{executable: render}]
`
	type fail int
	const (
		kubelet fail = iota
		metadata
	)
	for _, tc := range []struct {
		name    string
		yaml    string
		tenancy PodTenancy
		tenant  string // the tenant whose meter is followed
		source  fail
		left    int    // the job's last sample with usage in the mapping
		fails   [2]int // samples in which the source fails: [from, to)
		runs    bool   // the job runs, in no mapping, while the source fails
		gone    int    // the first sample without its meter; 0: none
		back    int    // the job is back in the mapping
	}{
		{"a pod tenant, the kubelet failing for 2h", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, [2]int{3, 15}, true, 0, 15},
		{"a pod tenant, the metadata failing for 2h", "", PodTenancy{Label: "team"}, "batch-team", metadata, 2, [2]int{3, 15}, true, 0, 15},
		{"a file tenant of pods, the kubelet failing for 2h", file, PodTenancy{}, "jobs", kubelet, 2, [2]int{3, 15}, true, 0, 15},
		// 20 minutes of failure: gone 80 minutes after it left
		{"the time before and after the failure counts", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, [2]int{4, 6}, false, 10, 12},
		{"a tenant not of pods is forgotten on time", file, PodTenancy{}, "render", kubelet, 2, [2]int{3, 15}, false, 8, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &churnPods{}
			b := mustBuilder(t, tc.yaml, BuilderOptions{Pods: pods, PodTenancy: tc.tenancy, DepartedRetention: time.Hour})
			var kept float64 // the followed tenant's energy when it left
			for i := 0; i <= tc.back; i++ {
				failing := i >= tc.fails[0] && i < tc.fails[1]
				pods.down.Store(failing && tc.source == kubelet)
				pods.metaDown.Store(failing && tc.source == metadata)
				mapped := i <= tc.left || i >= tc.back
				names := []string{"web"}
				if mapped || failing && tc.runs {
					names = append(names, "job")
				}
				if mapped {
					pods.m.Store(podsOn(t, "svc/web=GPU-0::1", "batch/job=GPU-0::2"))
				} else {
					pods.m.Store(podsOn(t, "svc/web=GPU-0::1"))
				}
				r := churnReadings(i, step, names...)
				if mapped {
					p := testutil.MIGProc(300, "render", -1)
					p.SMUtil, p.UsedMemoryBytes = gpu.Float(0.1), gpu.Uint(gib)
					r.Devices[0].Processes = append(r.Devices[0].Processes, p)
				}
				s := b.Build(r, gpu.SamplerStats{})
				m := meterOf(s, tc.tenant)
				switch {
				case i == tc.left:
					if m == nil {
						t.Fatalf("sample %d: no meter for %s", i, tc.tenant)
					}
					kept = m.EnergyJoules
				case i > tc.left && i < tc.back:
					if want := tc.gone == 0 || i < tc.gone; (m != nil) != want {
						t.Errorf("sample %d (source failing: %v): meter %+v, want kept: %v", i, failing, m, want)
					}
				case i == tc.back && tc.gone == 0:
					if m == nil || m.EnergyJoules <= kept {
						t.Errorf("back: meter %+v, want it counting on from %v joules", m, kept)
					}
				}
			}
		})
	}
}
