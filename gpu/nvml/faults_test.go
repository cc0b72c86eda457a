package nvml

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestErrorInjection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		call  string
		ret   nvml.Return
		down  bool
		check func(d gpu.Device) bool // true when the reading is as expected
		log   []string
	}{
		{"power not supported", "GetPowerUsage", nvml.ERROR_NOT_SUPPORTED, false,
			func(d gpu.Device) bool { return d.PowerWatts == nil && d.PowerLimitW != nil },
			[]string{"call=nvmlDeviceGetPowerUsage", "ERROR_NOT_SUPPORTED"}},
		{"energy not supported", "GetTotalEnergyConsumption", nvml.ERROR_NOT_SUPPORTED, false,
			func(d gpu.Device) bool { return d.EnergyJoules == nil }, []string{"call=nvmlDeviceGetTotalEnergyConsumption"}},
		{"ecc not supported", "GetEccMode", nvml.ERROR_NOT_SUPPORTED, false,
			func(d gpu.Device) bool { return d.ECCEnabled == nil && d.ECCCorrectedTotal == nil }, []string{"call=nvmlDeviceGetEccMode"}},
		{"gpm not supported", "GpmQueryDeviceSupport", nvml.ERROR_NOT_SUPPORTED, false,
			func(d gpu.Device) bool { return d.Activity.SMActive == nil && d.ContextSwitchesTotal == nil },
			[]string{"call=nvmlGpmQueryDeviceSupport"}},
		{"processes no permission", "GetComputeRunningProcesses", nvml.ERROR_NO_PERMISSION, false,
			func(d gpu.Device) bool { return len(d.Processes) == 0 && d.ProcessesUnread }, []string{"call=nvmlDeviceGetComputeRunningProcesses", "ERROR_NO_PERMISSION"}},
		// a call a newer driver retired: that reading is gone, the GPU answers
		{"retired pages deprecated", "GetRetiredPagesPendingStatus", nvml.ERROR_DEPRECATED, false,
			func(d gpu.Device) bool { return d.Health.RetiredPagesPending == nil && d.Health.PCIeReplays != nil },
			[]string{"call=nvmlDeviceGetRetiredPagesPendingStatus", "ERROR_DEPRECATED"}},
		{"clock event reasons not supported", "GetCurrentClocksEventReasons", nvml.ERROR_NOT_SUPPORTED, false,
			func(d gpu.Device) bool { return d.ThrottleReasonUnknown && d.ThrottleReason == 0 },
			[]string{"call=nvmlDeviceGetCurrentClocksEventReasons"}},
		{"temperature no permission", "GetTemperature", nvml.ERROR_NO_PERMISSION, false,
			func(d gpu.Device) bool { return d.TemperatureC == nil }, []string{"call=nvmlDeviceGetTemperature"}},
		{"gpu lost", "GetMemoryInfo", nvml.ERROR_GPU_IS_LOST, true,
			func(d gpu.Device) bool { return strings.Contains(d.Err, "GPU_IS_LOST") && d.PowerWatts == nil }, []string{"GPU not answering"}},
		{"timeout", "GetClockInfo", nvml.ERROR_TIMEOUT, true,
			func(d gpu.Device) bool { return strings.Contains(d.Err, "ERROR_TIMEOUT") }, []string{"GPU not answering"}},
		// UNKNOWN says nothing of the GPU: it still gives its UUID, so
		// only that reading is left out (TestUnknownErrorAsksTheGPU)
		{"unknown error", "GetUtilizationRates", nvml.ERROR_UNKNOWN, false,
			func(d gpu.Device) bool { return d.GPUUtil == nil && d.MemUtil == nil && d.PowerWatts != nil },
			[]string{"reading failed on a GPU that answers", "call=nvmlDeviceGetUtilizationRates", "ERROR_UNKNOWN"}},
		// codes about one reading alone: the OS denying the feature (nvml.h
		// for nvmlDeviceGetFieldValues), no data
		{"field values denied by the OS", "GetFieldValues", nvml.ERROR_OPERATING_SYSTEM, false,
			func(d gpu.Device) bool { return d.Health.NVLinkLinks == nil && d.Health.PCIeReplays != nil },
			[]string{"call=nvmlDeviceGetFieldValues(NVLink)", "ERROR_OPERATING_SYSTEM"}},
		{"pcie replays no data", "GetPcieReplayCounter", nvml.ERROR_NO_DATA, false,
			func(d gpu.Device) bool { return d.Health.PCIeReplays == nil && d.Health.RemappedRowsCorrectable != nil },
			[]string{"call=nvmlDeviceGetPcieReplayCounter", "ERROR_NO_DATA"}},
		{"remapped rows unknown error", "GetRemappedRows", nvml.ERROR_UNKNOWN, false,
			func(d gpu.Device) bool {
				return d.Health.RemappedRowsCorrectable == nil && d.Health.RetiredPagesPending != nil
			},
			[]string{"call=nvmlDeviceGetRemappedRows", "ERROR_UNKNOWN"}},
		{"lost during GPM", "GpmSampleGet", nvml.ERROR_GPU_IS_LOST, true,
			func(d gpu.Device) bool { return d.Err != "" }, []string{"GPU not answering"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setProcs(3, []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			const bad = 3
			f.fail(bad, tc.call, tc.ret)
			b := f.backend()
			for k := 0; k < 3; k++ {
				rd := sample(t, b)
				f.clock.Advance(time.Second)
				for i, d := range rd.Devices {
					if i == bad {
						if d.Up == tc.down {
							t.Fatalf("sample %d: GPU %d Up=%v, want %v (err %q)", k, i, d.Up, !tc.down, d.Err)
						}
						if d.UUID != f.devs[i].UUID {
							t.Errorf("down GPU lost its identity: %q", d.UUID)
						}
						if !tc.check(d) {
							t.Errorf("sample %d: GPU %d reading not as expected: %+v", k, i, d)
						}
						continue
					}
					if !d.Up || d.PowerWatts == nil || d.TemperatureC == nil {
						t.Errorf("healthy GPU %d affected: up=%v err=%q", i, d.Up, d.Err)
					}
				}
			}
			if n := f.logs.count(tc.log...); n != 1 {
				t.Errorf("log lines with %v = %d, want exactly 1\n%s", tc.log, n, f.logs.String())
			}
		})
	}
}

func TestGPULostBackoffAndRecovery(t *testing.T) {
	f := newFixture(t, dgxh200.New())
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	c0 := sample(t, b).Devices[6].ContextSwitchesTotal
	if c0 == nil || *c0 == 0 {
		t.Fatalf("no context switches before the loss: %v", c0)
	}
	f.fail(6, "GetMemoryInfo", nvml.ERROR_GPU_IS_LOST)
	rd := sample(t, b)
	if rd.Devices[6].Up {
		t.Fatal("lost GPU reported up")
	}
	calls := len(f.devs[6].GetMemoryInfo_v2Calls())
	// Within the first back-off the GPU is not touched.
	f.clock.Advance(backoffBase / 2)
	rd = sample(t, b)
	if rd.Devices[6].Up || len(f.devs[6].GetMemoryInfo_v2Calls()) != calls {
		t.Fatalf("lost GPU retried before its back-off")
	}
	if rd.Devices[6].Err == "" {
		t.Errorf("skipped GPU has no error")
	}
	// After the back-off it is retried (by UUID) and still fails: the next
	// wait doubles.
	f.clock.Advance(backoffBase)
	sample(t, b)
	if c := len(f.srv.DeviceGetHandleByUUIDCalls()); c != 1 {
		t.Errorf("handle re-acquired %d times, want 1", c)
	}
	f.clock.Advance(backoffBase + time.Second) // < 2*base since the last failure
	rd = sample(t, b)
	if rd.Devices[6].Up {
		t.Fatal("retried before the doubled back-off")
	}
	// The GPU comes back.
	f.fail(6, "GetMemoryInfo", nvml.SUCCESS)
	f.clock.Advance(2 * backoffBase)
	rd = sample(t, b)
	if !rd.Devices[6].Up || rd.Devices[6].Err != "" || rd.Devices[6].PowerWatts == nil {
		t.Fatalf("GPU did not recover: %+v", rd.Devices[6])
	}
	if !strings.Contains(f.logs.String(), "GPU answering again") {
		t.Errorf("recovery not logged")
	}
	// The counters survive the loss (the GPM samples of the lost handle
	// were freed; counting resumes from a new sample).
	if c := rd.Devices[6].ContextSwitchesTotal; c == nil || *c < *c0 {
		t.Errorf("context switches went from %d to %v across the loss", *c0, c)
	}
	f.clock.Advance(time.Second)
	if c := sample(t, b).Devices[6].ContextSwitchesTotal; c == nil || *c <= *c0 {
		t.Errorf("context switches did not resume after recovery: %d -> %v", *c0, c)
	}
	// The re-acquired handle is registered for XID events again.
	if n := len(f.devs[6].RegisterEventsCalls()); n < 2 {
		t.Errorf("GPU registered for events %d times, want again after recovery", n)
	}
	for i, d := range rd.Devices {
		if !d.Up {
			t.Errorf("GPU %d down", i)
		}
	}
	f.closeWithoutLeaks(b)
}

func TestBackoffGrows(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{1, 5 * time.Second}, {2, 10 * time.Second}, {3, 20 * time.Second}, {7, 5 * time.Minute}, {50, 5 * time.Minute}} {
		if got := backoff(tc.failures); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
}

func TestMissingSymbols(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.enableMIG(1, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	f.setProcs(0, []nvml.ProcessInfo{{Pid: 9, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}},
		[]nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}})
	f.setMissing(symGpmSupport, symGpmSampleGet, symGpmMigSampleGet, symClocksEventReasons, symEnergy,
		symMPSProcesses, symProcessUtil, symVirtMode, symEventSetCreate, symMemoryInfoV2)
	// Unwire what must not be called: the mock panics if it is.
	for _, d := range f.devs {
		d.GpmQueryDeviceSupportFunc = nil
		d.GpmSampleGetFunc = nil
		d.GpmMigSampleGetFunc = nil
		d.GetCurrentClocksEventReasonsFunc = nil
		d.GetTotalEnergyConsumptionFunc = nil
		d.GetMPSComputeRunningProcessesFunc = nil
		d.GetProcessUtilizationFunc = nil
		d.GetVirtualizationModeFunc = nil
		d.RegisterEventsFunc = nil
		d.GetMemoryInfo_v2Func = nil
	}
	f.srv.GpmSampleAllocFunc = nil
	f.srv.EventSetCreateFunc = nil
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	rd := sample(t, b)
	for i, d := range rd.Devices {
		if !d.Up {
			t.Fatalf("GPU %d down: %s", i, d.Err)
		}
		if d.Activity.SMActive != nil || d.EnergyJoules != nil || d.ContextSwitchesTotal != nil {
			t.Errorf("GPU %d: reading from a missing symbol", i)
		}
		// falls back to the older throttle-reasons call, whose
		// applications-clocks bit says whether clocks are locked
		if d.ThrottleReason != 0x4 || d.ClocksLocked == nil || *d.ClocksLocked {
			t.Errorf("GPU %d: throttle reasons %x locked %v", i, d.ThrottleReason, d.ClocksLocked)
		}
		// and to the v1 memory call, whose use includes the reserved memory
		if d.MemoryUsedBytes != uint64(i+1)<<30+fixtureReserved || d.MemoryTotalBytes == 0 {
			t.Errorf("GPU %d: memory %d/%d", i, d.MemoryUsedBytes, d.MemoryTotalBytes)
		}
	}
	p := rd.Devices[0].Processes
	if len(p) != 1 || p[0].PID != 9 || p[0].SMUtil != nil || p[0].Name != "proc9" { // (named from procfs, not NVML)
		t.Errorf("processes with missing symbols: %+v", p)
	}
	if b.events != nil {
		t.Errorf("event goroutine started without the event calls")
	}
	if !strings.Contains(f.logs.String(), "NVML symbols missing") {
		t.Errorf("missing symbols not logged")
	}
}

func TestInitFailure(t *testing.T) {
	for _, tc := range []struct {
		ret  nvml.Return
		want []string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, []string{"libnvidia-ml.so.1", "--gpus", "--backend=sim"}},
		{nvml.ERROR_DRIVER_NOT_LOADED, []string{"kernel module", "--backend=sim"}},
		{nvml.ERROR_NO_PERMISSION, []string{"NVIDIA_VISIBLE_DEVICES", "permission"}},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, []string{"versions"}},
		{nvml.ERROR_UNKNOWN, []string{"nvidia-smi", "--backend=sim"}},
	} {
		t.Run(returnName(tc.ret), func(t *testing.T) {
			srv := dgxh100.New()
			srv.InitFunc = func() nvml.Return { return tc.ret }
			// Nothing else may be called after a failed Init: the mock
			// panics on unwired calls, so unwire the usual next ones.
			srv.DeviceGetCountFunc = nil
			srv.SystemGetDriverVersionFunc = nil
			srv.ExtensionsFunc = nil
			srv.ShutdownFunc = nil
			b, err := New(Options{Lib: srv})
			if err == nil || b != nil {
				t.Fatalf("New succeeded after a failed Init")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestInitPanicBecomesError(t *testing.T) {
	srv := dgxh100.New()
	srv.DeviceGetCountFunc = nil // unwired: the mock panics
	b, err := New(Options{Lib: srv})
	if err == nil || b != nil {
		t.Fatalf("New with a panicking library succeeded")
	}
	// Init succeeded, so the library is released again.
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times after a failed New, want 1", n)
	}
}

func TestPanicInOneGPUIsContained(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.devs[5].GetTemperatureFunc = nil // the mock panics
	f.devs[6].GetPowerUsageFunc = func() (uint32, nvml.Return) {
		var samples []uint32
		return samples[len(f.devs)], nvml.SUCCESS // a wrapper's slice out of range
	}
	b := f.backend()
	rd := sample(t, b)
	// The error names the library call that panicked.
	for gpu, want := range map[int]string{
		5: "panicked in mock.(*Device).GetTemperature: ",
		6: "panicked in mock.(*Device).GetPowerUsage: runtime error: index out of range",
	} {
		if d := rd.Devices[gpu]; d.Up || !strings.Contains(d.Err, want) {
			t.Errorf("GPU %d = up %v err %q, want an error with %q", gpu, d.Up, d.Err, want)
		}
	}
	for i, d := range rd.Devices {
		if i != 5 && i != 6 && !d.Up {
			t.Errorf("GPU %d down", i)
		}
	}
}

func TestEventWaitPanicIsContained(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	var waits atomic.Int64
	f.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				waits.Add(1)
				panic("broken wrapper")
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	b := f.backend()
	deadline := time.Now().Add(5 * time.Second)
	for waits.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// The goroutine now waits on the clock before retrying.
	for f.clock.Waiters() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	f.clock.Advance(eventRetry)
	for waits.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if waits.Load() < 2 {
		t.Fatalf("event goroutine did not retry after a panic")
	}
	sample(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := f.logs.count("waiting for NVML events failed"); n != 1 {
		t.Errorf("%d log lines for the failing wait", n)
	}
}

// A GPU whose handle NVML did not give at start is served down, comes
// back once it answers, and is then registered for XID events and reports
// them. With every GPU missing at start (an exporter started while they
// were in reset, a one-GPU host) no event set was kept: the GPUs, once
// back, never reported an XID.
func TestGPUMissingAtStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing func(i int) bool
	}{
		{"one GPU", func(i int) bool { return i == 2 }},
		{"every GPU", func(int) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			byIndex := f.srv.DeviceGetHandleByIndexFunc
			var broken atomic.Bool
			broken.Store(true)
			f.srv.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
				if tc.missing(i) && broken.Load() {
					return nil, nvml.ERROR_GPU_IS_LOST
				}
				return byIndex(i)
			}
			b := f.backend()
			rd := sample(t, b)
			if len(rd.Devices) != 8 || rd.Devices[2].Up || rd.Devices[2].Index != 2 ||
				!strings.Contains(rd.Devices[2].Err, "nvmlDeviceGetHandleByIndex(2): ERROR_GPU_IS_LOST") {
				t.Fatalf("GPU 2 = %+v", rd.Devices[2])
			}
			broken.Store(false)
			f.clock.Advance(backoffBase)
			rd = sample(t, b)
			if d := rd.Devices[2]; !d.Up || d.UUID != f.devs[2].UUID {
				t.Fatalf("GPU 2 did not come back: %+v", d)
			}
			// Once it is there, it is registered for XID events and reports them.
			if n := len(f.devs[2].RegisterEventsCalls()); n != 1 {
				t.Fatalf("GPU 2 registered for events %d times, want 1", n)
			}
			f.events <- nvml.EventData{Device: f.devs[2], EventType: nvml.EventTypeXidCriticalError, EventData: 94, GpuInstanceId: noInstance}
			deadline := time.Now().Add(5 * time.Second)
			var got []gpu.Event
			for time.Now().Before(deadline) && len(got) == 0 {
				got = sample(t, b).Devices[2].Events
				time.Sleep(5 * time.Millisecond)
			}
			if len(got) != 1 || got[0].Code != 94 {
				t.Errorf("events of the GPU missing at start = %+v", got)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A GPU is reported down at the first call that returns a fatal error, and
// is asked nothing more that sample: a GPU whose calls time out
// (ERROR_TIMEOUT, each after the driver waited out its own timeout) was
// asked every other reading of the sample too, the whole sample, which
// holds every GPU's series, waiting for each, and again at each retry.
// Each case makes the GPU time out from one call on (the calls in the
// order read).
func TestGPUDownAskedNothingMore(t *testing.T) {
	order := []string{"GetMemoryInfo", "GetClockInfo", "GetMaxClockInfo", "GetPowerUsage", "GetEnforcedPowerLimit",
		"GetTemperature", "GetCurrentClocksEventReasons", "GetTotalEnergyConsumption", "GetPersistenceMode",
		"GetComputeMode", "GetEccMode", "GetTotalEccErrors", "GetUtilizationRates", "GetFieldValues", "GetNvLinkState",
		"GetNvLinkErrorCounter", "GetPcieThroughput", "GetPcieReplayCounter", "GetRemappedRows", "GetRetiredPages",
		"GetRetiredPagesPendingStatus", "GpmQueryDeviceSupport", "GpmSampleGet", "GetComputeRunningProcesses",
		"GetMPSComputeRunningProcesses", "GetGraphicsRunningProcesses", "GetProcessUtilization", "GetVirtualizationMode"}
	for i, first := range order {
		t.Run(first, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			const bad = 3
			f.setProcs(bad, []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
			for _, call := range order[i:] {
				f.fail(bad, call, nvml.ERROR_TIMEOUT)
			}
			b := f.backend()
			if d := sample(t, b).Devices[bad]; d.Up || !strings.Contains(d.Err, "ERROR_TIMEOUT") {
				t.Fatalf("GPU %d up %v, error %q", bad, d.Up, d.Err)
			}
			if n := f.failedCalls(bad); n != 1 {
				t.Errorf("%d calls that time out in the sample, want 1", n)
			}
			f.clock.Advance(backoffBase)
			sample(t, b)
			if n := f.failedCalls(bad); n != 1 {
				t.Errorf("%d calls that time out in the retry, want 1", n)
			}
		})
	}
}

// A reset drops a clock lock. A GPU lost (GPU_IS_LOST, RESET_REQUIRED)
// after its clocks were locked through the backend still read
// ClocksLocked true once back, from the backend's own record, the only
// source from R535 on. Its handle dropped, the record goes too: unknown.
// A GPU that timed out keeps its handle, and the record.
func TestClocksLockForgottenWithLostGPU(t *testing.T) {
	for _, tc := range []struct {
		ret  nvml.Return
		want *bool
	}{
		{nvml.ERROR_GPU_IS_LOST, nil},
		{nvml.ERROR_RESET_REQUIRED, nil},
		{nvml.ERROR_TIMEOUT, gpu.Bool(true)},
	} {
		t.Run(returnName(tc.ret), func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			b := f.backend()
			if err := b.LockClocks(context.Background(), f.devs[1].UUID, gpu.ClockLock{MinMHz: 1500, MaxMHz: 1500}); err != nil {
				t.Fatal(err)
			}
			if d := sample(t, b).Devices[1]; d.ClocksLocked == nil || !*d.ClocksLocked {
				t.Fatalf("ClocksLocked %v after the lock", d.ClocksLocked)
			}
			f.fail(1, "GetPowerUsage", tc.ret)
			if d := sample(t, b).Devices[1]; d.Up {
				t.Fatal("GPU up while failing")
			}
			f.fail(1, "GetPowerUsage", nvml.SUCCESS)
			f.clock.Advance(backoffBase)
			d := sample(t, b).Devices[1]
			if !d.Up {
				t.Fatalf("GPU not back: %s", d.Err)
			}
			if (d.ClocksLocked == nil) != (tc.want == nil) || d.ClocksLocked != nil && *d.ClocksLocked != *tc.want {
				t.Errorf("ClocksLocked %v once back, want %v", fmtBool(d.ClocksLocked), fmtBool(tc.want))
			}
		})
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unknown"
	}
	return strconv.FormatBool(*b)
}

// TestErrorMatrix injects each of the usual failures into every call the
// fixture can fail, on a plain GPU with processes (3) and a MIG GPU (5):
// unavailable readings keep the GPU up, a GPU that stops answering is down
// (and only that one), and nothing panics.
func TestErrorMatrix(t *testing.T) {
	calls := map[string][]int{ // call -> GPUs that make it
		"GetMemoryInfo": {3, 5}, "GetClockInfo": {3, 5}, "GetMaxClockInfo": {3, 5}, "GetPowerUsage": {3, 5},
		"GetEnforcedPowerLimit": {3, 5}, "GetTemperature": {3, 5}, "GetCurrentClocksEventReasons": {3, 5},
		"GetTotalEnergyConsumption": {3, 5}, "GetPersistenceMode": {3, 5}, "GetComputeMode": {3, 5},
		"GetEccMode": {3, 5}, "GetTotalEccErrors": {3, 5}, "GetUtilizationRates": {3, 5},
		"GetComputeRunningProcesses": {3, 5}, "GetMPSComputeRunningProcesses": {3, 5},
		"GetProcessUtilization": {3}, "GpmQueryDeviceSupport": {3, 5}, "GpmSampleGet": {3, 5},
		"GpmMigSampleGet": {5}, "GetVirtualizationMode": {3, 5}, "GetMaxMigDeviceCount": {5},
		"MIG.GetMemoryInfo": {5}, "GetFieldValues": {3, 5}, "NVLinkField": {3, 5}, "GetNvLinkState": {3, 5},
		"GetPcieThroughput": {3, 5}, "GetPcieReplayCounter": {3, 5}, "GetRemappedRows": {3, 5},
		"GetRetiredPages": {3, 5}, "GetRetiredPagesPendingStatus": {3, 5},
		"GetMigDeviceHandleByIndex": {5}, "MIG.GetGpuInstanceId": {5},
	}
	fatal := map[nvml.Return]bool{nvml.ERROR_NOT_SUPPORTED: false, nvml.ERROR_NO_PERMISSION: false,
		nvml.ERROR_GPU_IS_LOST: true, nvml.ERROR_TIMEOUT: true}
	for call, users := range calls {
		for ret, isFatal := range fatal {
			t.Run(call+"/"+returnName(ret), func(t *testing.T) {
				f := newFixture(t, dgxh100.New())
				f.enableMIG(5, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
				f.setProcs(3, []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nil)
				f.fail(3, call, ret)
				f.fail(5, call, ret)
				b := f.backend()
				sample(t, b)
				f.clock.Advance(time.Second)
				rd := sample(t, b)
				for i, d := range rd.Devices {
					wantDown := isFatal && slices.Contains(users, i)
					if d.Up == wantDown {
						t.Errorf("GPU %d up=%v, want %v (err %q)", i, d.Up, !wantDown, d.Err)
					}
					if wantDown && !strings.Contains(d.Err, returnName(ret)) {
						t.Errorf("GPU %d error %q does not name %s", i, d.Err, returnName(ret))
					}
					if d.UUID != f.devs[i].UUID {
						t.Errorf("GPU %d lost its identity", i)
					}
				}
			})
		}
	}
}

// The readings say which process lists NVML answered: with the compute
// list refused the MPS clients' is still read and its clients listed, and
// the other way round; the tuner takes a client missing from a list read
// for gone, and from one refused (or a library without the call) for
// unknown. Both flags were one: a refused compute list hid the MPS
// clients' list, read, from the tuner, which kept every client it capped.
func TestProcessListsRead(t *testing.T) {
	for _, tc := range []struct {
		name              string
		fail              string
		missing           string
		pids              []uint32
		unread, mpsUnread bool
	}{
		{"both read", "", "", []uint32{7, 41}, false, false},
		{"compute list refused", "GetComputeRunningProcesses", "", []uint32{41}, true, false},
		{"MPS clients' list refused", "GetMPSComputeRunningProcesses", "", []uint32{7}, false, true},
		{"MPS clients' call missing", "", symMPSProcesses, []uint32{7}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setProcs(2, []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}},
				[]nvml.ProcessInfo{{Pid: 41, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}})
			if tc.fail != "" {
				f.fail(2, tc.fail, nvml.ERROR_NOT_SUPPORTED)
			}
			if tc.missing != "" {
				f.setMissing(tc.missing)
			}
			b := f.backend()
			sample(t, b)
			f.clock.Advance(time.Second)
			d := sample(t, b).Devices[2]
			var pids []uint32
			for _, p := range d.Processes {
				pids = append(pids, p.PID)
			}
			if !slices.Equal(pids, tc.pids) || d.ProcessesUnread != tc.unread || d.MPSProcessesUnread != tc.mpsUnread {
				t.Errorf("processes %v, ProcessesUnread %v, MPSProcessesUnread %v; want %v, %v, %v",
					pids, d.ProcessesUnread, d.MPSProcessesUnread, tc.pids, tc.unread, tc.mpsUnread)
			}
			f.closeWithoutLeaks(b)
		})
	}
}
