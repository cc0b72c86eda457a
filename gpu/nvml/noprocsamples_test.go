package nvml

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
)

// The host clock steps back 30 s (an NTP step) while a process keeps
// running kernels. The last answer before the step carried samples
// stamped up to T; after it the host clock (the exporter's and the
// driver's) reads T-30s. The test clock cannot go back, so the step is
// modelled from after it: an answer's samples are stamped 30 s past the
// sample time, beyond futureSlack: not of the interval, no figure. The
// driver then stamps its new samples with the host clock: that answer is
// no figure, not "no process ran", which would meter the busy GPU as idle.
func TestNoProcessSamplesNotAfterClockStepBack(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.setProcs(0, []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
	b := f.backend()
	sample(t, b) // primes lastSeen
	driver := f.devs[0].GetProcessUtilizationFunc
	f.devs[0].GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		s, r := driver(lastSeen)
		// the samples taken before the host clock stepped back 30 s
		for i := range s {
			s[i].TimeStamp += uint64((30 * time.Second).Microseconds())
		}
		return s, r
	}
	f.clock.Advance(time.Second)
	if d := sample(t, b).Devices[0]; d.Processes[0].SMUtil != nil || d.NoProcessSamples {
		t.Fatalf("samples stamped 30 s ahead: SM utilization %v, NoProcessSamples %v; want neither", d.Processes[0].SMUtil, d.NoProcessSamples)
	}
	f.devs[0].GetProcessUtilizationFunc = driver // after the step: the host's clock
	for i := range 3 {
		f.clock.Advance(5 * time.Second)
		d := sample(t, b).Devices[0]
		if d.NoProcessSamples {
			t.Errorf("sample %d after a 30 s clock step back: NoProcessSamples (no process ran) while process 1 ran at 50-70%% SM", i)
		}
	}
}

// NVML's driver records per-process utilization at its own sample period
// ("between 1 second and 1/6 second, depending on the product",
// nvmlUtilization_t). With --sample.interval below that period (it may be
// as short as 100 ms), an interval holds no new driver sample while the
// process runs flat out, and the call answers NOT_FOUND: no figure, not
// "no process ran" (3 intervals of 4 below, at a 1 s driver period and a
// 250 ms interval, would have billed a quarter of the GPU time).
func TestNoProcessSamplesNotBetweenDriverSamples(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.setProcs(0, []nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
	const period = uint64(1_000_000) // µs: the driver's sample period on this product
	f.devs[0].GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		newest := uint64(f.clock.Now().UnixMicro()) / period * period
		var out []nvml.ProcessUtilizationSample
		for ts := newest; ts > lastSeen && ts+10*period > newest; ts -= period {
			out = append(out, nvml.ProcessUtilizationSample{Pid: 1, TimeStamp: ts, SmUtil: 100, MemUtil: 50})
		}
		if len(out) == 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return out, nvml.SUCCESS
	}
	b := f.backend()
	sample(t, b) // primes
	noneRan := 0
	const n = 40
	for range n {
		f.clock.Advance(250 * time.Millisecond)
		if sample(t, b).Devices[0].NoProcessSamples {
			noneRan++
		}
	}
	if noneRan > 0 {
		t.Errorf("%d of %d intervals say no process ran (NoProcessSamples) while process 1 ran at 100%% SM throughout", noneRan, n)
	}
}
