package tenant

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// churnPods is a PodMapper whose mapping, and the outcome of its refreshes
// (refresh), the test sets between samples.
type churnPods struct {
	m  atomic.Pointer[kube.Mapping]
	mu sync.Mutex
	st kube.Status
}

func (p *churnPods) Start(context.Context)   {}
func (p *churnPods) Wait()                   {}
func (p *churnPods) Refresh(context.Context) {}
func (p *churnPods) Mapping() *kube.Mapping  { return p.m.Load() }
func (p *churnPods) Status() kube.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// refresh records a refresh at at as kube.Mapper's Status does: the
// pod-resources query failing (down), or, after it succeeded, the read of
// the pod metadata (metaDown).
func (p *churnPods) refresh(at time.Time, down, metaDown bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.Up, p.st.Metadata.Source = !down, "pods.json"
	if down {
		return
	}
	p.st.LastSuccess, p.st.Metadata.Up = at, !metaDown
	if !metaDown {
		p.st.Metadata.LastSuccess = at
	}
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
// the cap, where they grew by one a job; so does what the samples of a GPU
// read without its energy counter are owed, which kept every job's part.
func TestDepartedTenantsBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		step      time.Duration
		steps     int
		retention time.Duration
		failing   bool // the kubelet's pod-resources API fails all along
		unread    bool // the GPU's energy counter is read on the first sample only
		// at the end: meters, context-switch counts kept for jobs that left,
		// context-switch counts in all (a count served 0 at the first
		// sample is kept like any other)
		wantMeters, wantKept, wantCS int
	}{
		{"kept forever (retention 0)", time.Minute, 200, 0, false, false, 201, 199, 201},
		{"a job a minute, 1h retention", time.Minute, 600, time.Hour, false, false, 61, 59, 61},
		{"a job a second, 1h retention: the cap", time.Second, 600, time.Hour, false, false, 2 + MaxDepartedPerGPU, MaxDepartedPerGPU, 2 + MaxDepartedPerGPU},
		// the jobs are not known to have left, but the cap holds
		{"a job a minute, the kubelet failing: the cap", time.Minute, 600, time.Hour, true, false, 2 + MaxDepartedPerGPU, MaxDepartedPerGPU, 2 + MaxDepartedPerGPU},
		{"a job a minute, 1h retention, the energy counter unread", time.Minute, 600, time.Hour, false, true, 61, 59, 61},
		{"a job a second, 1h retention, the energy counter unread: the cap", time.Second, 600, time.Hour, false, true, 2 + MaxDepartedPerGPU, MaxDepartedPerGPU, 2 + MaxDepartedPerGPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &churnPods{}
			b := mustBuilder(t, "", BuilderOptions{Pods: pods, PodTenancy: PodTenancy{ByNamespace: true}, DepartedRetention: tc.retention})
			var s *Snapshot
			for i := range tc.steps {
				job := fmt.Sprintf("job-%d", i)
				pods.m.Store(podsOn(t, "svc/web=GPU-0::1", job+"/"+job+"=GPU-0::2"))
				r := churnReadings(i, tc.step, "web", job)
				if tc.unread && i > 0 {
					r.Devices[0].EnergyJoules = nil
				}
				pods.refresh(r.Time, tc.failing, false)
				s = b.Build(r, gpu.SamplerStats{})
			}
			if len(s.Meters) != tc.wantMeters || len(s.KeptContextSwitches) != tc.wantKept {
				t.Errorf("%d meters and %d kept context-switch counts, want %d and %d", len(s.Meters), len(s.KeptContextSwitches), tc.wantMeters, tc.wantKept)
			}
			if len(b.meters.tenants) != tc.wantMeters || len(b.attr.csAcc) != tc.wantCS {
				t.Errorf("state: %d meters and %d context-switch counts, want %d and %d", len(b.meters.tenants), len(b.attr.csAcc), tc.wantMeters, tc.wantCS)
			}
			if o := b.meters.owed["GPU-0"]; o != nil && (len(o.parts) != 1 || len(o.parts[0].tenants) > tc.wantMeters) {
				t.Errorf("state: %d sets of prices owed, %d tenants owed energy in the first; want 1, at most the %d metered", len(o.parts), len(o.parts[0].tenants), tc.wantMeters)
			}
			if tc.unread {
				// the counter read again: the jobs forgotten had no energy
				// yet, their part is idle, and the tenants and idle add up
				// to the GPU's increase
				s = b.Build(churnReadings(tc.steps, tc.step, "web"), gpu.SamplerStats{})
				checkConserved(t, s.Meters, s.GPUMeters)
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
// lost or its process lists not read; then they are forgotten, the GPU's meters untouched, so that the
// tenants and idle add up to the GPU's energy less what the job had; back,
// it starts at 0.
func TestDepartedMetersForgotten(t *testing.T) {
	const step = 10 * time.Minute
	for _, tc := range []struct {
		name       string
		left       int    // the job's last sample with usage
		down       [2]int // samples in which the GPU is lost: [from, to)
		unread     [2]int // samples in which NVML refuses its process lists
		gone, back int
	}{
		{"gone an hour after it left", 2, [2]int{}, [2]int{}, 8, 10},
		{"the time the GPU is lost does not count", 2, [2]int{3, 20}, [2]int{}, 25, 26},
		// lost once, 40 minutes after it left: those 40 minutes count
		{"the time before the GPU is lost counts", 2, [2]int{6, 7}, [2]int{}, 9, 10},
		{"lost for one sample, 20 minutes after it left", 2, [2]int{4, 5}, [2]int{}, 9, 10},
		// nothing read of its processes says the job left: as a GPU lost
		{"the time its process lists are not read does not count", 2, [2]int{}, [2]int{3, 20}, 25, 26},
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
				if i >= tc.unread[0] && i < tc.unread[1] {
					// (its activity not read either: no unlisted activity
					// goes to a tenant of its own, forgotten with the job)
					r.Devices[0].Processes, r.Devices[0].ProcessesUnread, r.Devices[0].Activity.SMActive = nil, true, nil
				}
				pods.refresh(r.Time, false, false)
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

// samples are the samples from, from+every, ... before to.
func samples(from, to, every int) map[int]bool {
	out := map[int]bool{}
	for i := from; i < to; i += every {
		out[i] = true
	}
	return out
}

// TestDepartedWhilePodSourceFails: with a 1h retention and a sample every
// 10 minutes, a tenant whose usage rests on the pod mapping has its absence
// counted up to the mapping's last good refresh alone: while its source
// fails (the kubelet's pod-resources API; the pod metadata, where labels
// decide the tenant) its job's pod, started again meanwhile, is in no
// mapping and its usage goes to Unassigned, but it has not left; back in
// the mapping, its meters count on from where they were. Once a refresh
// succeeds with the tenant still without usage, the time of the failure
// counts: a kubelet failing every other sample lets it go on time, or one
// sample late where the refresh of the sample the hour runs out in fails.
// Where labels decide nothing (a tenant by namespace), a failing metadata
// read holds no tenant. A tenant matched by its executable is forgotten on
// time.
func TestDepartedWhilePodSourceFails(t *testing.T) {
	const step = 10 * time.Minute
	const file = `tenants:
- name: jobs
  selectors: [{kubernetes: {namespace: batch}}]
- name: render
  selectors: [{executable: render}]
`
	const byLabel = `tenants:
- name: jobs
  selectors: [{kubernetes: {namespace: batch, labels: {team: batch-team}}}]
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
		left    int          // the job's last sample with usage in the mapping
		fails   map[int]bool // samples in which the source fails
		runs    bool         // the job runs, in no mapping, while the source fails
		gone    int          // the first sample without its meter; 0: none
		back    int          // the job is back in the mapping
	}{
		{"a pod tenant, the kubelet failing for 2h", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, samples(3, 15, 1), true, 0, 15},
		{"a pod tenant by a label, the metadata failing for 2h", "", PodTenancy{Label: "team"}, "batch-team", metadata, 2, samples(3, 15, 1), true, 0, 15},
		{"a file tenant of pods, the kubelet failing for 2h", file, PodTenancy{}, "jobs", kubelet, 2, samples(3, 15, 1), true, 0, 15},
		{"a file tenant by labels, the metadata failing for 2h", byLabel, PodTenancy{}, "jobs", metadata, 2, samples(3, 15, 1), true, 0, 15},
		// the hour runs out at sample 8, the kubelet failing: gone at the
		// first good refresh after
		{"the hour running out while the kubelet fails", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, samples(4, 12, 1), false, 12, 14},
		// the refresh at 6 finds it still gone: the 20 minutes count
		{"a failure over before the hour runs out counts", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, samples(4, 6, 1), false, 8, 12},
		{"the kubelet failing every other sample, up at 8", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, samples(3, 20, 2), false, 8, 20},
		{"the kubelet failing every other sample, down at 8", "", PodTenancy{ByNamespace: true}, "batch", kubelet, 2, samples(4, 20, 2), false, 9, 20},
		// pod-resources places pods in their namespace: the labels decide nothing
		{"a pod tenant by namespace, the metadata failing", "", PodTenancy{ByNamespace: true}, "batch", metadata, 2, samples(3, 15, 1), false, 8, 15},
		{"a file tenant by namespace, the metadata failing", file, PodTenancy{}, "jobs", metadata, 2, samples(3, 15, 1), false, 8, 15},
		{"a tenant not of pods is forgotten on time", file, PodTenancy{}, "render", kubelet, 2, samples(3, 15, 1), false, 8, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := &churnPods{}
			b := mustBuilder(t, tc.yaml, BuilderOptions{Pods: pods, PodTenancy: tc.tenancy, DepartedRetention: time.Hour})
			var kept float64 // the followed tenant's energy when it left
			for i := 0; i <= tc.back; i++ {
				failing := tc.fails[i]
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
				pods.refresh(r.Time, failing && tc.source == kubelet, failing && tc.source == metadata)
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

// TestDepartedNotOfPodsWithoutPodTenancy: without the pod tenancy, a
// tenant that is not the file's (one a reload removed, its meters kept)
// is no tenant of pods: a failing kubelet does not hold it, it is
// forgotten an hour after it left.
func TestDepartedNotOfPodsWithoutPodTenancy(t *testing.T) {
	const step = 10 * time.Minute
	const jobs = `tenants:
- name: jobs
  selectors: [{kubernetes: {namespace: batch}}]
`
	pods := &churnPods{}
	b, file := fileBuilder(t, jobs+`- name: render
  selectors: [{executable: render}]
`, BuilderOptions{Pods: pods, DepartedRetention: time.Hour})
	pods.m.Store(podsOn(t, "svc/web=GPU-0::1"))
	for i := 0; i <= 10; i++ {
		r := churnReadings(i, step, "web")
		if i <= 2 {
			p := testutil.MIGProc(300, "render", -1)
			p.SMUtil, p.UsedMemoryBytes = gpu.Float(0.1), gpu.Uint(gib)
			r.Devices[0].Processes = append(r.Devices[0].Processes, p)
		}
		if i == 3 {
			if err := os.WriteFile(file, []byte(jobs), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := b.Reload(""); err != nil {
				t.Fatal(err)
			}
		}
		pods.refresh(r.Time, i >= 3, false)
		m := meterOf(b.Build(r, gpu.SamplerStats{}), "render")
		if want := i < 8; (m != nil) != want {
			t.Errorf("sample %d: render's meter %+v, want kept: %v", i, m, want)
		}
	}
}
