package nvml

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// served drives the backend the way the exporter serves it: each scrape
// takes a sample (gpu.Sampler), attributes it (tenant.Builder, no tenants file) and
// gathers the collectors over it through a pedantic registry.
type served struct {
	t       *testing.T
	f       *fixture
	b       *Backend
	sampler *gpu.Sampler
	builder *tenant.Builder
	reg     *prometheus.Registry
	snap    *tenant.Snapshot
	// counters are the counters' values of the previous scrape, by series.
	counters map[string]float64
}

func newServed(t *testing.T, f *fixture) *served {
	t.Helper()
	s := &served{t: t, f: f, b: f.backend(), counters: map[string]float64{}}
	s.sampler = gpu.NewSampler(s.b, f.clock, time.Second, nil)
	var err error
	s.builder, err = tenant.NewBuilder(nil, tenant.BuilderOptions{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	e, err := collector.NewExporter(func() *tenant.Snapshot { return s.snap }, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	s.reg = prometheus.NewPedanticRegistry()
	if err := s.reg.Register(e); err != nil {
		t.Fatal(err)
	}
	return s
}

// scrape advances the clock by d, samples, builds and gathers; it returns
// the value of every series by "name{labels}". A counter that went down
// since the previous scrape fails the test.
func (s *served) scrape(d time.Duration) map[string]float64 {
	s.t.Helper()
	s.f.clock.Advance(d)
	if err := s.sampler.SampleOnce(context.Background()); err != nil {
		s.t.Fatalf("sample: %v", err)
	}
	s.snap = s.builder.Build(s.sampler.Latest(), s.sampler.Stats())
	mfs, err := s.reg.Gather()
	if err != nil {
		s.t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "vgpu_scrape_collector_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + labelString(m)
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
				if prev, ok := s.counters[key]; ok && v < prev {
					s.t.Errorf("counter %s went down: %g -> %g", key, prev, v)
				}
				s.counters[key] = v
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			default:
				continue
			}
			out[key] = v
		}
	}
	return out
}

func labelString(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(ls)
	return "{" + strings.Join(ls, ",") + "}"
}

// ofGPU keeps the series of one GPU (by its uuid label).
func ofGPU(series map[string]float64, uuid string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range series {
		if strings.Contains(k, `uuid="`+uuid+`"`) {
			out[k] = v
		}
	}
	return out
}

// In MIG mode NVML gives the whole GPU's memory only to a privileged
// caller (NO_PERMISSION otherwise; each MIG device answers). Without it the
// GPU's memory series are absent, and so is its memory integral: it was
// served as 0 byte-seconds growing by nothing, below the tenants' own
// memory byte-seconds on the same GPU (a negative unattributed memory).
func TestMIGMemoryWithoutPrivilegesServed(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(5, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	f.migProcs[[2]int{5, 0}] = []nvml.ProcessInfo{{Pid: 55, UsedGpuMemory: 1 << 30, GpuInstanceId: 0, ComputeInstanceId: 0}}
	f.fail(5, "GetMemoryInfo", nvml.ERROR_NO_PERMISSION)
	f.fail(5, "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION)
	s := newServed(t, f)
	s.scrape(time.Second)
	got := ofGPU(s.scrape(time.Second), f.devs[5].UUID)
	for k, v := range got {
		if strings.HasPrefix(k, "vgpu_gpu_memory_used_byte_seconds_total{") || strings.HasPrefix(k, "vgpu_gpu_memory_total_bytes{") {
			t.Errorf("%s %g served for a GPU whose memory NVML refused", k, v)
		}
	}
	want := `vgpu_tenant_memory_byte_seconds_total{gpu="5",tenant="unassigned",uuid="` + f.devs[5].UUID + `"}`
	if got[want] != 1<<30 {
		t.Errorf("%s = %g, want the MIG process's 1 GiB for 1 s", want, got[want])
	}
	other := ofGPU(s.scrape(time.Second), f.devs[4].UUID)
	if k := `vgpu_gpu_memory_used_byte_seconds_total{gpu="4",uuid="` + f.devs[4].UUID + `"}`; other[k] == 0 {
		t.Errorf("%s absent or 0 on a GPU whose memory is read", k)
	}
}

// GPUs whose handles NVML does not give at start are served down, each
// under its index: with two of them (no UUID yet, both "") the GPU
// collector failed the scrape on a device "reported twice" and served only
// the first, so the second was not even down. Once they answer, they are
// served up under their UUIDs.
func TestGPUsMissingAtStartServed(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	byIndex := f.srv.DeviceGetHandleByIndexFunc
	missing := true
	f.srv.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if missing && (i == 2 || i == 6) {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return byIndex(i)
	}
	s := newServed(t, f)
	got := s.scrape(time.Second)
	if v := got[`vgpu_scrape_collector_success{collector="gpu"}`]; v != 1 {
		t.Errorf("gpu collector success %g, want 1", v)
	}
	for i := range f.devs {
		up := `vgpu_gpu_up{gpu="` + strconv.Itoa(i) + `",uuid="` + f.devs[i].UUID + `"}`
		want := 1.0
		if i == 2 || i == 6 {
			up, want = `vgpu_gpu_up{gpu="`+strconv.Itoa(i)+`",uuid=""}`, 0
		}
		if v, ok := got[up]; !ok || v != want {
			t.Errorf("%s = %g (served %v), want %g", up, v, ok, want)
		}
	}
	missing = false
	got = s.scrape(backoffBase)
	for _, i := range []int{2, 6} {
		if up := `vgpu_gpu_up{gpu="` + strconv.Itoa(i) + `",uuid="` + f.devs[i].UUID + `"}`; got[up] != 1 {
			t.Errorf("%s = %g after it answered, want 1", up, got[up])
		}
	}
}

// A process list NVML refuses (NO_PERMISSION, NOT_SUPPORTED; in MIG mode a
// MIG device's, the whole GPU's being refused without privileges) does not
// say how many processes run: vgpu_gpu_processes was served 0, as for an
// idle GPU. It is absent; a list read is served. So too where a MIG
// device's list was never asked for: its handle refused, or its GPU
// instance not given (it was served, of GPU instance -1, and the GPU's
// count 0 as if every list had been read).
func TestProcessCountUnreadServed(t *testing.T) {
	for _, tc := range []struct {
		name string
		mig  bool
		fail []string
		ret  nvml.Return
		want float64 // -1: absent
	}{
		{"read", false, nil, nvml.SUCCESS, 1},
		{"no permission", false, []string{"GetComputeRunningProcesses"}, nvml.ERROR_NO_PERMISSION, -1},
		{"not supported", false, []string{"GetComputeRunningProcesses"}, nvml.ERROR_NOT_SUPPORTED, -1},
		{"MIG devices' lists read", true, []string{"GetComputeRunningProcesses"}, nvml.ERROR_NO_PERMISSION, 1},
		{"a MIG device's list refused", true, []string{"GetComputeRunningProcesses", "MIG.GetComputeRunningProcesses"}, nvml.ERROR_NO_PERMISSION, -1},
		{"a MIG device's handle refused", true, []string{"GetComputeRunningProcesses", "GetMigDeviceHandleByIndex"}, nvml.ERROR_NO_PERMISSION, -1},
		{"a MIG device's GPU instance not given", true, []string{"GetComputeRunningProcesses", "MIG.GetGpuInstanceId"}, nvml.ERROR_NOT_SUPPORTED, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			const dev = 3
			if tc.mig {
				f.enableMIG(dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
				f.migProcs[[2]int{dev, 0}] = []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 30, GpuInstanceId: 0, ComputeInstanceId: 0}}
			} else {
				f.setProcs(dev, []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			}
			for _, call := range tc.fail {
				f.fail(dev, call, tc.ret)
			}
			s := newServed(t, f)
			s.scrape(time.Second)
			got := s.scrape(time.Second)
			k := `vgpu_gpu_processes{gpu="3",uuid="` + f.devs[dev].UUID + `"}`
			if v, ok := got[k]; ok != (tc.want >= 0) || ok && v != tc.want {
				t.Errorf("%s = %g (served %v), want %g (-1: absent)", k, v, ok, tc.want)
			}
			if k := `vgpu_gpu_up{gpu="3",uuid="` + f.devs[dev].UUID + `"}`; got[k] != 1 {
				t.Errorf("%s = %g, want 1", k, got[k])
			}
		})
	}
}

// On a GPU serving MPS clients the compute list holds the MPS server
// alone. With the MPS clients' list refused (no permission, a code that
// does not tell) the GPU read exclusive: its lists taken for read,
// vgpu_gpu_processes served 1 for a GPU running many clients, their
// energy metered as idle, and the MPS controls gone. A GPU last read in
// MPS mode stays so while its clients' list is refused, and its lists
// are not read whatever its mode; where NVML does not support the list
// (or the library lacks the call), the compute list is all there is.
// Once the compute list shows no MPS server (none of its processes, each
// named, is nvidia-cuda-mps-server), the GPU is read from it: kept in MPS
// mode, a GPU whose server had gone stayed so for as long as the clients'
// list was refused.
func TestMPSClientsListRefusedServed(t *testing.T) {
	const dev = 3
	proc := func(pid uint32, mem uint64) nvml.ProcessInfo {
		return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: mem, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
	}
	server, other := proc(7, 1<<20), proc(8, 1<<30)
	for _, tc := range []struct {
		name  string
		ret   nvml.Return // of the MPS clients' list
		first bool        // from the first sample; else from the third, two read before
		// the compute list from the third sample (besides the server and
		// other before it); nil: unchanged
		compute []nvml.ProcessInfo
		mode    gpu.SharingMode
		count   float64 // vgpu_gpu_processes; -1: absent
	}{
		{"read", nvml.SUCCESS, false, nil, gpu.SharingMPS, 4},
		{"no permission, read before", nvml.ERROR_NO_PERMISSION, false, nil, gpu.SharingMPS, -1},
		{"a code that does not tell, read before", nvml.ERROR_UNKNOWN, false, nil, gpu.SharingMPS, -1},
		{"no permission, never read", nvml.ERROR_NO_PERMISSION, true, nil, gpu.SharingTimeSlice, -1},
		{"not supported", nvml.ERROR_NOT_SUPPORTED, true, nil, gpu.SharingTimeSlice, 2},
		{"no permission, read before, the server gone", nvml.ERROR_NO_PERMISSION, false, []nvml.ProcessInfo{other}, gpu.SharingExclusive, -1},
		{"no permission, read before, nothing running", nvml.ERROR_NO_PERMISSION, false, []nvml.ProcessInfo{}, gpu.SharingExclusive, -1},
		{"no permission, read before, the server alone", nvml.ERROR_NO_PERMISSION, false, []nvml.ProcessInfo{server}, gpu.SharingMPS, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.procfs.set(server.Pid, "1000", "/usr/bin/nvidia-cuda-mps-server\x00")
			clients := []nvml.ProcessInfo{proc(41, 1<<30), proc(42, 1<<30)}
			f.setProcs(dev, []nvml.ProcessInfo{server, other}, clients)
			s := newServed(t, f)
			if tc.first {
				f.fail(dev, "GetMPSComputeRunningProcesses", tc.ret)
			}
			s.scrape(time.Second)
			s.scrape(time.Second)
			f.fail(dev, "GetMPSComputeRunningProcesses", tc.ret)
			if tc.compute != nil {
				f.setProcs(dev, tc.compute, clients)
			}
			for range 2 {
				got := ofGPU(s.scrape(time.Second), f.devs[dev].UUID)
				d := s.sampler.Latest().DeviceByUUID(f.devs[dev].UUID)
				if d.Mode != tc.mode || d.ListsRead() != (tc.count >= 0) {
					t.Errorf("mode %q, lists read %v; want %q, %v", d.Mode, d.ListsRead(), tc.mode, tc.count >= 0)
				}
				k := `vgpu_gpu_processes{gpu="3",uuid="` + f.devs[dev].UUID + `"}`
				if v, ok := got[k]; ok != (tc.count >= 0) || ok && v != tc.count {
					t.Errorf("%s = %g (served %v), want %g (-1: absent)", k, v, ok, tc.count)
				}
				info := 0
				for k := range got {
					if strings.HasPrefix(k, "vgpu_gpu_info{") && strings.Contains(k, `mode="`+string(tc.mode)+`"`) {
						info++
					}
				}
				if info != 1 {
					t.Errorf("vgpu_gpu_info of mode %q served %d times, want once", tc.mode, info)
				}
			}
		})
	}
}
