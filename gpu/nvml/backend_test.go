package nvml

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func sample(t *testing.T, b *Backend) *gpu.Readings {
	t.Helper()
	var rd *gpu.Readings
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Sample panicked: %v", r)
			}
		}()
		var err error
		rd, err = b.Sample(context.Background())
		if err != nil {
			t.Fatalf("Sample: %v", err)
		}
	}()
	return rd
}

func TestSampleFullHost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fix      func(t *testing.T) *fixture
		gpuName  string
		memBytes uint64
		migGI    int
		profile  string
		bw       float64
	}{
		{"dgxh100", func(t *testing.T) *fixture { return newFixture(t, dgxh100.New()) },
			"NVIDIA H100 80GB HBM3", 81920 << 20, nvml.GPU_INSTANCE_PROFILE_3_SLICE, "3g.40gb", 3.35e12},
		{"dgxh200", func(t *testing.T) *fixture { return newFixture(t, dgxh200.New()) },
			"NVIDIA H200 141GB HBM3e", 0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, "3g.71gb", 4.8e12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fix(t)
			// GPUs 2 and 5 in MIG mode; 0 time-sliced, 1 MPS.
			f.enableMIG(2, tc.migGI, tc.migGI)
			f.enableMIG(5, tc.migGI)
			f.setProcs(0, []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance},
				{Pid: 101, UsedGpuMemory: 2 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			f.setProcs(1, []nvml.ProcessInfo{{Pid: 200, UsedGpuMemory: 64 << 20, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}},
				[]nvml.ProcessInfo{{Pid: 201, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}})
			f.setProcs(2, []nvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 3 << 30, GpuInstanceId: 1, ComputeInstanceId: 0}}, nil)
			b := f.backend()

			r1 := sample(t, b)
			if len(r1.Devices) != 8 {
				t.Fatalf("got %d devices, want 8", len(r1.Devices))
			}
			if r1.Backend != "nvml" || r1.DriverVersion != "550.54.15" || r1.CUDAVersion != "12.4" || r1.Interval != 0 {
				t.Errorf("readings header = %q %q %q %v", r1.Backend, r1.DriverVersion, r1.CUDAVersion, r1.Interval)
			}
			if r1.Devices[0].Activity.SMActive != nil {
				t.Errorf("GPM activity on the first sample; needs two")
			}
			// the source is named from the first sample, as the next
			// sample's ratios will have it: vgpu_gpu_info keeps its labels
			if a := r1.Devices[0].Activity; a.Source != "gpm" {
				t.Errorf("first sample's activity source %q, want gpm", a.Source)
			}
			for j, m := range r1.Devices[2].MIG {
				if m.Activity.Source != "gpm" || m.Activity.SMActive != nil {
					t.Errorf("GPU 2 MIG %d first sample's activity %+v, want source gpm and no ratio", j, m.Activity)
				}
			}
			f.clock.Advance(time.Second)
			rd := sample(t, b)
			if rd.Interval != time.Second {
				t.Errorf("Interval = %v, want 1s", rd.Interval)
			}
			for i, d := range rd.Devices {
				if !d.Up || d.Err != "" {
					t.Fatalf("GPU %d down: %s", i, d.Err)
				}
				if d.UUID != f.devs[i].UUID || d.Name != tc.gpuName || d.Index != i || d.PCIBusID == "" {
					t.Errorf("GPU %d identity = %q %q %d %q", i, d.UUID, d.Name, d.Index, d.PCIBusID)
				}
				if want := f.devs[i].Config.MemoryMB << 20; d.MemoryTotalBytes != want || d.MemoryUsedBytes != uint64(i+1)<<30 {
					t.Errorf("GPU %d memory = %d/%d", i, d.MemoryUsedBytes, d.MemoryTotalBytes)
				}
				if d.SMCount != 132 || d.MemoryBandwidthBytesPS != tc.bw {
					t.Errorf("GPU %d SMs %d bandwidth %g", i, d.SMCount, d.MemoryBandwidthBytesPS)
				}
				if *d.SMClockHz != 1980e6 || *d.MemClockHz != 2619e6 || *d.SMClockMaxHz != 1980e6 {
					t.Errorf("GPU %d clocks %v %v", i, *d.SMClockHz, *d.MemClockHz)
				}
				if *d.PowerWatts != 350+float64(i) || *d.PowerLimitW != 700 || *d.TemperatureC != 40+float64(i) {
					t.Errorf("GPU %d power/temp %v %v %v", i, *d.PowerWatts, *d.PowerLimitW, *d.TemperatureC)
				}
				// R535+: the applications-clocks bit is no longer used, so
				// its absence does not say "not locked".
				if d.ThrottleReason != 0x4 || d.ThrottleReasonUnknown || d.ClocksLocked != nil || *d.EnergyJoules != 123456.789 {
					t.Errorf("GPU %d reasons %x locked %v energy %v", i, d.ThrottleReason, d.ClocksLocked, *d.EnergyJoules)
				}
				if !*d.PersistenceMode || d.ComputeMode != "Default" || !*d.ECCEnabled || *d.ECCCorrectedTotal != 5 || *d.ECCUncorrectedTotal != 0 {
					t.Errorf("GPU %d modes/ECC wrong", i)
				}
				if *d.GPUUtil != 0.75 || *d.MemUtil != 0.40 {
					t.Errorf("GPU %d util %v %v", i, *d.GPUUtil, *d.MemUtil)
				}
				a := d.Activity
				if a.Source != "gpm" || a.SMActive == nil || *a.SMActive != float64(10+i-1)/100 || *a.SMOccupancy != 0.2 || *a.DRAMActive != 0.3 || *a.TensorActive != 0.4 {
					t.Errorf("GPU %d activity %+v", i, a)
				}
				// 8 GR engines x 3 requests, 8 x 1000 cycles, one interval so far
				if d.ContextSwitchesTotal == nil || *d.ContextSwitchesTotal != 24 || *d.ContextSwitchCyclesTotal != 8000 {
					t.Errorf("GPU %d context switches %v", i, d.ContextSwitchesTotal)
				}
				if d.Scheduler != nil || d.VGPUs != nil {
					t.Errorf("GPU %d vGPU data on a non-vGPU host", i)
				}
			}
			// sharing modes
			wantMode := map[int]gpu.SharingMode{0: gpu.SharingTimeSlice, 1: gpu.SharingMPS, 2: gpu.SharingMIG, 3: gpu.SharingExclusive, 5: gpu.SharingMIG}
			for i, m := range wantMode {
				if rd.Devices[i].Mode != m {
					t.Errorf("GPU %d mode %q, want %q", i, rd.Devices[i].Mode, m)
				}
			}
			// processes with per-process utilization averaged over the interval
			p0 := rd.Devices[0].Processes
			if len(p0) != 2 || p0[0].PID != 100 || p0[1].PID != 101 || p0[0].Type != gpu.ProcessCompute ||
				*p0[0].UsedMemoryBytes != 1<<30 || *p0[0].SMUtil != 0.6 || *p0[0].MemUtil != 0.25 ||
				p0[0].GPUInstanceID != -1 || p0[0].UID != -1 || p0[0].Name != "proc100" {
				t.Errorf("GPU 0 processes %+v", p0)
			}
			p1 := rd.Devices[1].Processes
			if len(p1) != 2 || p1[1].PID != 201 || p1[1].Type != gpu.ProcessMPS {
				t.Errorf("GPU 1 processes %+v", p1)
			}
			// MIG: instances, profile names, GPM per GPU instance, no per-process util
			g2 := rd.Devices[2]
			if !g2.MIGEnabled || len(g2.MIG) != 2 {
				t.Fatalf("GPU 2 MIG %+v", g2.MIG)
			}
			for j, m := range g2.MIG {
				if m.Profile != tc.profile || m.GPUInstanceID != j || m.ComputeInstanceID != 0 || m.UUID == "" ||
					m.SMCount == 0 || m.MemoryTotalBytes == 0 || m.MemoryUsedBytes != 1<<30 {
					t.Errorf("GPU 2 MIG %d = %+v", j, m)
				}
				if m.Activity.Source != "gpm" || *m.Activity.SMActive != float64(10+2+j)/100 {
					t.Errorf("GPU 2 MIG %d activity %+v", j, m.Activity)
				}
			}
			pm := g2.Processes
			if len(pm) != 1 || pm[0].GPUInstanceID != 1 || pm[0].ComputeInstanceID != 0 || pm[0].SMUtil != nil {
				t.Errorf("GPU 2 MIG processes %+v", pm)
			}
			if c := len(f.devs[2].GetProcessUtilizationCalls()); c != 0 {
				t.Errorf("GetProcessUtilization called %d times on a MIG GPU", c)
			}
			// Counters accumulate.
			f.clock.Advance(time.Second)
			r3 := sample(t, b)
			if got := *r3.Devices[4].ContextSwitchesTotal; got != 48 {
				t.Errorf("context switches after two intervals = %d, want 48", got)
			}
			f.closeWithoutLeaks(b)
		})
	}
}

func TestGPMNeedsHundredMilliseconds(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	sample(t, b)
	f.clock.Advance(50 * time.Millisecond)
	rd := sample(t, b)
	if rd.Devices[0].Activity.SMActive != nil {
		t.Fatalf("activity computed over 50 ms")
	}
	f.clock.Advance(60 * time.Millisecond) // 110 ms since the kept sample
	rd = sample(t, b)
	if rd.Devices[0].Activity.SMActive == nil {
		t.Fatalf("no activity over 110 ms")
	}
	f.closeWithoutLeaks(b)
}

func TestXIDEvents(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	f.events <- nvml.EventData{Device: f.devs[4], EventType: nvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: noInstance}
	f.events <- nvml.EventData{Device: f.devs[4], EventType: nvml.EventTypeXidCriticalError, EventData: 48, GpuInstanceId: 2}
	deadline := time.Now().Add(5 * time.Second)
	var got []gpu.Event
	for time.Now().Before(deadline) && len(got) < 2 {
		rd := sample(t, b)
		got = append(got, rd.Devices[4].Events...)
		for i, d := range rd.Devices {
			if i != 4 && len(d.Events) > 0 {
				t.Fatalf("event delivered to GPU %d", i)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(got) != 2 || got[0].Kind != gpu.EventXID || got[0].Code != 79 || got[1].Code != 48 ||
		!strings.Contains(got[1].Message, "GPU instance 2") || got[0].Time != t0 {
		t.Fatalf("events = %+v", got)
	}
	// Delivered once.
	if rd := sample(t, b); len(rd.Devices[4].Events) != 0 {
		t.Errorf("events delivered twice")
	}
	done := b.events.done
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("event goroutine still running after Close")
	}
	if _, err := b.Sample(context.Background()); err == nil {
		t.Errorf("Sample after Close succeeded")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestSampleCancelled(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestProfileNames(t *testing.T) {
	for _, tc := range []struct {
		index int
		p     nvml.GpuInstanceProfileInfo
		want  string
	}{
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, dgxh100.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_1_SLICE], "1g.10gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, dgxh100.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1], "1g.10gb+me"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, dgxh100.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2], "1g.20gb"},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, dgxh100.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_7_SLICE], "7g.80gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, dgxh200.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_1_SLICE], "1g.18gb"},
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, dgxh200.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_4_SLICE], "4g.71gb"},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, dgxh200.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_7_SLICE], "7g.141gb"},
		// real H100 sizes are a little under the marketing figure
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GpuInstanceProfileInfo{Id: 9, SliceCount: 3, MemorySizeMB: 40192}, "3g.40gb"},
		// the media-extension variant by its index, whatever its ID
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GpuInstanceProfileInfo{Id: 20, SliceCount: 1, MemorySizeMB: 9984}, "1g.10gb+me"},
	} {
		if got := profileName(tc.index, tc.p); got != tc.want {
			t.Errorf("profileName(%d slices, %d MB) = %q, want %q", tc.p.SliceCount, tc.p.MemorySizeMB, got, tc.want)
		}
	}
}

// TestRealLibrary runs against the host's real NVML: without a driver New
// must fail with an actionable error (and nothing may crash); with one, a
// sample of every GPU must succeed.
func TestRealLibrary(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		if !strings.Contains(err.Error(), "--backend=sim") {
			t.Fatalf("error without the sim hint: %v", err)
		}
		t.Logf("no NVML here: %v", err)
		return
	}
	defer b.Close()
	rd := sample(t, b)
	for _, d := range rd.Devices {
		if !d.Up {
			t.Errorf("GPU %d down: %s", d.Index, d.Err)
		}
		if d.UUID == "" || d.MemoryTotalBytes == 0 {
			t.Errorf("GPU %d: empty identity or memory", d.Index)
		}
	}
}

func TestProcessUtilizationLastSeen(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.setProcs(0, []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	sample(t, b)
	calls := f.devs[0].GetProcessUtilizationCalls()
	if len(calls) != 2 {
		t.Fatalf("%d calls", len(calls))
	}
	// The first call asks for everything, the next one for what is newer
	// than the newest sample of the first answer.
	if calls[0].V != 0 || calls[1].V != uint64(t0.UnixMicro()) {
		t.Errorf("lastSeen = %d, %d; want 0, %d", calls[0].V, calls[1].V, t0.UnixMicro())
	}
}

func BenchmarkSample8GPUs(b *testing.B) {
	f := newFixture(b, dgxh200.New())
	f.enableMIG(7, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE)
	for i := 0; i < 7; i++ {
		f.setProcs(i, []nvml.ProcessInfo{{Pid: uint32(100 + i), UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
	}
	be, err := New(Options{Lib: f.srv, Clock: f.clock})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	// The figure includes the mocks' own bookkeeping (they record every
	// call), so it is an upper bound of the backend's cost per sample.
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.clock.Advance(time.Second)
		if _, err := be.Sample(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMIGProcessesWithoutPrivileges(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE)
	// The whole-GPU list needs privileges in MIG mode; the MIG devices'
	// lists do not (and leave the instance IDs unset).
	f.fail(0, "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION)
	f.mu.Lock()
	f.migProcs[[2]int{0, 1}] = []nvml.ProcessInfo{{Pid: 77, UsedGpuMemory: 5 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}
	f.mu.Unlock()
	b := f.backend()
	rd := sample(t, b)
	d := rd.Devices[0]
	if !d.Up || len(d.Processes) != 1 {
		t.Fatalf("up %v processes %+v", d.Up, d.Processes)
	}
	p := d.Processes[0]
	if p.PID != 77 || p.GPUInstanceID != 1 || *p.UsedMemoryBytes != 5<<30 {
		t.Errorf("process %+v", p)
	}
}

func TestXIDEventsOfOtherHandles(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	mig := &mock.Device{GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return f.devs[3], nvml.SUCCESS }}
	other := &mock.Device{
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
		GetUUIDFunc:                            func() (string, nvml.Return) { return "GPU-not-on-this-host", nvml.SUCCESS },
	}
	broken := &mock.Device{} // every call panics
	for _, d := range []nvml.Device{broken, other, mig} {
		f.events <- nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: 31, GpuInstanceId: 1}
	}
	deadline := time.Now().Add(5 * time.Second)
	var got []gpu.Event
	for time.Now().Before(deadline) && len(got) == 0 {
		rd := sample(t, b)
		got = append(got, rd.Devices[3].Events...)
		time.Sleep(5 * time.Millisecond)
	}
	if len(got) != 1 || got[0].Code != 31 {
		t.Fatalf("events of GPU 3 = %+v", got)
	}
	if n := f.logs.count("event dropped"); n != 1 {
		t.Errorf("panicking handle logged %d times", n)
	}
	b.events.mu.Lock()
	defer b.events.mu.Unlock()
	if len(b.events.pending) != 0 {
		t.Errorf("events kept for unknown GPUs: %v", b.events.pending)
	}
}

// notFound is the driver's answer without a sample since lastSeen.
func notFound(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	return nil, nvml.ERROR_NOT_FOUND
}

func TestProcessUtilizationNoSample(t *testing.T) {
	for _, tc := range []struct {
		name string
		// util replaces the GPU's GetProcessUtilization on the second sample
		util func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return)
		// the device says no process ran (NoProcessSamples): only the
		// driver's own answer says so, not a failed call
		noneRan bool
		// after is how long after the second sample the third is taken
		// (0: the fixture has no newer sample); busy is the GPU's own
		// utilization then (percent)
		after time.Duration
		busy  uint32
	}{
		// No sample since lastSeen: the driver answers NOT_FOUND. That
		// no process ran is told only where the answer covers one of
		// the driver's periods (at most a second) and the GPU's own
		// utilization is 0.
		{"not found, the GPU idle over two seconds", notFound, true, 2 * time.Second, 0},
		{"not found, the GPU busy", notFound, false, 2 * time.Second, 40},
		{"not found within a driver period", notFound, false, 250 * time.Millisecond, 0},
		{"not found, the clock not moved", nil, false, 0, 0},
		// go-nvml sizes its buffer with a first call and slices it with
		// the count of the second; more samples in between panic.
		{"wrapper panics", func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			s := make([]nvml.ProcessUtilizationSample, 1)
			n := 2
			return s[:n], nvml.SUCCESS
		}, false, 0, 0},
		{"insufficient size", func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return []nvml.ProcessUtilizationSample{}, nvml.ERROR_INSUFFICIENT_SIZE
		}, false, 0, 0},
		// A sample the driver should have filtered out is not counted.
		{"stale sample", func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return []nvml.ProcessUtilizationSample{{Pid: 1, TimeStamp: lastSeen, SmUtil: 99, MemUtil: 99}}, nvml.SUCCESS
		}, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setProcs(0, []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			b := f.backend()
			// The first answer only sets lastSeen: what the driver kept
			// before is not the interval of a sample.
			rd := sample(t, b)
			if p := rd.Devices[0].Processes; len(p) != 1 || p[0].SMUtil != nil {
				t.Fatalf("first sample: %+v", p)
			}
			f.clock.Advance(time.Second)
			rd = sample(t, b)
			if p := rd.Devices[0].Processes; len(p) != 1 || p[0].SMUtil == nil || *p[0].SMUtil != 0.6 || rd.Devices[0].NoProcessSamples {
				t.Fatalf("second sample: %+v, no process ran: %v", p, rd.Devices[0].NoProcessSamples)
			}
			if tc.util != nil {
				f.devs[0].GetProcessUtilizationFunc = tc.util
			}
			f.devs[0].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: tc.busy, Memory: tc.busy}, nvml.SUCCESS
			}
			f.clock.Advance(tc.after)
			rd = sample(t, b)
			d := rd.Devices[0]
			if !d.Up || d.Err != "" {
				t.Fatalf("GPU down: %q", d.Err)
			}
			if len(d.Processes) != 1 || d.Processes[0].SMUtil != nil || d.Processes[0].MemUtil != nil {
				t.Errorf("processes %+v, want one without utilization", d.Processes)
			}
			if d.NoProcessSamples != tc.noneRan {
				t.Errorf("NoProcessSamples = %v, want %v", d.NoProcessSamples, tc.noneRan)
			}
			if n := f.logs.count("nvmlDeviceGetProcessUtilization"); n != 0 {
				t.Errorf("%d log lines for an interval without samples:\n%s", n, f.logs.String())
			}
		})
	}
}

// A process that ran during the interval and exited before the sample is
// in no list, but the driver kept its utilization samples: the device says
// it had such activity, which no listed process accounts for.
func TestProcessUtilizationUnlisted(t *testing.T) {
	for _, tc := range []struct {
		name string
		// the samples of PID 9, not listed, in the second sample's interval
		// (at the interval's end, or at lastSeen: the previous interval's)
		sm, mem uint32
		stale   bool
		// PID 9 is a graphics process's (listed as such, not kept); fail
		// a list's call that fails (then which PIDs run is not known)
		graphics bool
		fail     string
		want     bool
	}{
		{"sm and memory", 40, 10, false, false, "", true},
		{"memory only", 0, 10, false, false, "", true},
		{"idle", 0, 0, false, false, "", false},
		{"previous interval", 40, 10, true, false, "", false},
		{"a graphics process", 40, 10, false, true, "", false},
		{"the MPS list refused", 40, 10, false, false, "GetMPSComputeRunningProcesses", false},
		{"the graphics list refused", 40, 10, false, false, "GetGraphicsRunningProcesses", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setProcs(0, []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			if tc.graphics {
				f.gfx[0] = []nvml.ProcessInfo{{Pid: 9, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}
			}
			if tc.fail != "" {
				f.fail(0, tc.fail, nvml.ERROR_NOT_SUPPORTED)
			}
			b := f.backend()
			if rd := sample(t, b); rd.Devices[0].UnlistedActivity {
				t.Fatal("first sample: unlisted activity")
			}
			listed := f.devs[0].GetProcessUtilizationFunc
			f.devs[0].GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				out, r := listed(lastSeen)
				ts := uint64(f.clock.Now().UnixMicro()) - 200
				if tc.stale {
					ts = lastSeen
				}
				return append(out, nvml.ProcessUtilizationSample{Pid: 9, TimeStamp: ts, SmUtil: tc.sm, MemUtil: tc.mem}), r
			}
			f.clock.Advance(time.Second)
			d := sample(t, b).Devices[0]
			if d.UnlistedActivity != tc.want {
				t.Errorf("UnlistedActivity = %v, want %v", d.UnlistedActivity, tc.want)
			}
			if len(d.Processes) != 1 || d.Processes[0].PID != 1 || d.Processes[0].SMUtil == nil || *d.Processes[0].SMUtil != 0.6 {
				t.Errorf("processes %+v, want PID 1 alone with its own utilization", d.Processes)
			}
		})
	}
}

func TestGPMOddValues(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	rd := sample(t, b)
	before := *rd.Devices[0].ContextSwitchesTotal
	beforeCyc := *rd.Devices[0].ContextSwitchCyclesTotal
	f.mu.Lock()
	f.gpmOverride = map[nvml.GpmMetricId]float64{
		nvml.GPM_METRIC_SM_UTIL:                 math.NaN(),
		nvml.GPM_METRIC_SM_OCCUPANCY:            250, // clamped
		nvml.GPM_METRIC_DRAM_BW_UTIL:            -3,  // clamped
		nvml.GPM_METRIC_GR0_CTXSW_REQUESTS:      math.NaN(),
		nvml.GPM_METRIC_GR1_CTXSW_REQUESTS:      -5,
		nvml.GPM_METRIC_GR2_CTXSW_CYCLES_ACTIVE: math.Inf(1),
	}
	f.mu.Unlock()
	f.clock.Advance(time.Second)
	rd = sample(t, b)
	d := rd.Devices[0]
	if d.Activity.SMActive != nil || *d.Activity.SMOccupancy != 1 || *d.Activity.DRAMActive != 0 {
		t.Errorf("activity %v %v %v", d.Activity.SMActive, *d.Activity.SMOccupancy, *d.Activity.DRAMActive)
	}
	// 6 engines x 3 requests and 7 x 1000 cycles are countable.
	if got := *d.ContextSwitchesTotal; got != before+18 {
		t.Errorf("context switches %d -> %d, want +18", before, got)
	}
	if got := *d.ContextSwitchCyclesTotal; got != beforeCyc+7000 {
		t.Errorf("context-switch cycles %d -> %d, want +7000", beforeCyc, got)
	}
}

func TestKnownGPUTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		sms  int
		bw   float64
	}{
		{"NVIDIA H100 80GB HBM3", 132, 3.35e12},
		{"NVIDIA H200", 132, 4.8e12},
		{"NVIDIA H200 141GB HBM3e", 132, 4.8e12},
		{"NVIDIA GH200 480GB", 0, 0},      // another memory system
		{"NVIDIA H100 PCIe", 0, 0},        // 114 SMs, not in the table
		{"NVIDIA A100-SXM4-80GB", 108, 0}, // bandwidth differs by board
		{"NVIDIA A100-SXM4-40GB", 108, 0},
		{"NVIDIA A100-PCIE-40GB", 108, 0},
		{"NVIDIA A30", 0, 0}, // 56 SMs, not in the table
	} {
		f := newFixture(t, dgxh100.New())
		f.devs[0].GetNameFunc = func() (string, nvml.Return) { return tc.name, nvml.SUCCESS }
		b := f.backend()
		d := sample(t, b).Devices[0]
		if d.Name != tc.name || d.SMCount != tc.sms || d.MemoryBandwidthBytesPS != tc.bw {
			t.Errorf("%q: SMs %d bandwidth %g, want %d %g", tc.name, d.SMCount, d.MemoryBandwidthBytesPS, tc.sms, tc.bw)
		}
	}
}

func TestMIGInstanceRecreatedUnderSameID(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	f.enableMIG(2, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	if a := sample(t, b).Devices[2].MIG[0].Activity; a.SMActive == nil {
		t.Fatalf("no MIG activity over a second: %+v", a)
	}
	// The instance is destroyed and created again between two samples: same
	// GPU instance ID, another MIG device.
	byIndex := f.devs[2].GetMigDeviceHandleByIndexFunc
	f.devs[2].GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		h, r := byIndex(i)
		if m, ok := h.(*mock.Device); ok {
			m.GetUUIDFunc = func() (string, nvml.Return) { return "MIG-recreated", nvml.SUCCESS }
		}
		return h, r
	}
	f.clock.Advance(time.Second)
	m := sample(t, b).Devices[2].MIG[0]
	if m.UUID != "MIG-recreated" || m.Activity.SMActive != nil {
		t.Errorf("activity across two instances: %+v", m)
	}
	f.clock.Advance(time.Second)
	if m := sample(t, b).Devices[2].MIG[0]; m.Activity.SMActive == nil {
		t.Errorf("no activity of the new instance: %+v", m)
	}
	f.closeWithoutLeaks(b)
}

// Through the v1 call (older drivers) the whole-GPU list of a MIG GPU does
// not say the instances: the MIG devices' lists place the processes.
func TestMIGProcessesWithoutInstanceIDs(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	f.enableMIG(0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE)
	f.setProcs(0, []nvml.ProcessInfo{{Pid: 78, UsedGpuMemory: 5 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
	f.mu.Lock()
	f.migProcs[[2]int{0, 1}] = []nvml.ProcessInfo{{Pid: 78, UsedGpuMemory: 5 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}
	f.mu.Unlock()
	b := f.backend()
	d := sample(t, b).Devices[0]
	if len(d.Processes) != 1 || d.Processes[0].PID != 78 || d.Processes[0].GPUInstanceID != 1 {
		t.Errorf("processes %+v, want PID 78 in GPU instance 1", d.Processes)
	}
}

func TestMemoryInfoV2Fallback(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_ARGUMENT_VERSION_MISMATCH, nvml.ERROR_FUNCTION_NOT_FOUND} {
		t.Run(returnName(ret), func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.fail(2, "GetMemoryInfo_v2", ret)
			b := f.backend()
			d := sample(t, b).Devices[2]
			if !d.Up || d.MemoryUsedBytes != 3<<30+fixtureReserved {
				t.Errorf("up %v used %d, want the v1 figure", d.Up, d.MemoryUsedBytes)
			}
			if n := f.logs.count("GetMemoryInfo"); n != 0 {
				t.Errorf("%d log lines for a reading that the v1 call gave:\n%s", n, f.logs.String())
			}
		})
	}
}

func TestClocksLockedFromReasons(t *testing.T) {
	for _, tc := range []struct {
		name    string
		old     bool   // driver without the R535 clock-event reasons call
		reasons uint64 // what the driver reports
		want    string // "true", "false", "nil"
	}{
		{"R535 bit set", false, 0x2 | 0x4, "true"},
		{"R535 bit clear", false, 0x4, "nil"},
		{"older driver bit set", true, 0x2, "true"},
		{"older driver bit clear", true, 0x0, "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			if tc.old {
				f.setMissing(symClocksEventReasons)
			}
			f.devs[0].GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return tc.reasons, nvml.SUCCESS }
			f.devs[0].GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return tc.reasons, nvml.SUCCESS }
			b := f.backend()
			got := "nil"
			if l := sample(t, b).Devices[0].ClocksLocked; l != nil {
				got = fmt.Sprint(*l)
			}
			if got != tc.want {
				t.Errorf("ClocksLocked = %s, want %s", got, tc.want)
			}
		})
	}
}
