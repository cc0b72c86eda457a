package nvml

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
)

// Every code NVML has is named (one was printed "NVML error 17"), and
// only GPU_IS_LOST, RESET_REQUIRED and TIMEOUT take a GPU down: any other
// code from a reading (the OS denying a feature, host memory short, no
// data, ...) kept it down for good, the retry after the back-off failing
// at the same call.
func TestReturnCodes(t *testing.T) {
	fatal := map[nvml.Return]bool{nvml.ERROR_GPU_IS_LOST: true, nvml.ERROR_RESET_REQUIRED: true, nvml.ERROR_TIMEOUT: true}
	named := 0
	for r := nvml.Return(-1); r <= 1000; r++ {
		// go-nvml's own names, the library not loaded in tests
		theirs := r.Error()
		if strings.HasPrefix(theirs, "unknown return value") {
			continue
		}
		named++
		if got := returnName(r); !strings.HasPrefix(got, theirs) {
			t.Errorf("returnName(%d) = %q, want %q first", int32(r), got, theirs)
		}
		if r == nvml.SUCCESS {
			continue
		}
		if got := classify(r) == outcomeFatal; got != fatal[r] {
			t.Errorf("%s: fatal %v, want %v", theirs, got, fatal[r])
		}
	}
	if named < 30 {
		t.Fatalf("go-nvml names %d codes: the check checked nothing", named)
	}
	if got := returnName(nvml.Return(12345)); got != "NVML error 12345" {
		t.Errorf("a code newer than the table: %q", got)
	}
	if classify(nvml.Return(12345)) != outcomeCheck {
		t.Errorf("a code newer than the table is not asked about")
	}
}

// After UNKNOWN ("any unexpected error") from a reading, the GPU's UUID
// is asked, once a sample whatever the number of such readings: where it
// answers, only the readings are left out; where it does not, the GPU is
// down, its error naming both calls, and a lost one's handle is dropped.
func TestUnknownErrorAsksTheGPU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		uuid    nvml.Return // the UUID call's answer
		up      bool
		reacqd  bool // the handle re-acquired after the back-off
		errText []string
	}{
		{"GPU answers", nvml.SUCCESS, true, false, nil},
		{"GPU does not answer", nvml.ERROR_UNKNOWN, false, false,
			[]string{"nvmlDeviceGetUtilizationRates: ERROR_UNKNOWN", "nvmlDeviceGetUUID: ERROR_UNKNOWN"}},
		{"GPU lost", nvml.ERROR_GPU_IS_LOST, false, true,
			[]string{"nvmlDeviceGetUtilizationRates: ERROR_UNKNOWN", "nvmlDeviceGetUUID: ERROR_GPU_IS_LOST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			const bad = 2
			b := f.backend()
			sample(t, b)
			var asked atomic.Int32
			uuid := f.devs[bad].GetUUIDFunc
			f.devs[bad].GetUUIDFunc = func() (string, nvml.Return) {
				asked.Add(1)
				return uuid()
			}
			f.fail(bad, "GetUtilizationRates", nvml.ERROR_UNKNOWN)
			f.fail(bad, "GetRemappedRows", nvml.ERROR_UNKNOWN)
			f.fail(bad, "GetUUID", tc.uuid)
			f.clock.Advance(time.Second)
			d := sample(t, b).Devices[bad]
			if d.Up != tc.up {
				t.Fatalf("up=%v, want %v (err %q)", d.Up, tc.up, d.Err)
			}
			if n := asked.Load(); n != 1 {
				t.Errorf("UUID asked %d times in the sample, want 1", n)
			}
			for _, s := range tc.errText {
				if !strings.Contains(d.Err, s) {
					t.Errorf("err %q lacks %q", d.Err, s)
				}
			}
			if tc.up && (d.GPUUtil != nil || d.Health.RemappedRowsCorrectable != nil || d.PowerWatts == nil) {
				t.Errorf("readings: util %v, remapped rows %v, power %v; want the first two absent alone",
					d.GPUUtil, d.Health.RemappedRowsCorrectable, d.PowerWatts)
			}
			f.fail(bad, "GetUUID", nvml.SUCCESS)
			f.clock.Advance(backoffBase + time.Second)
			before := len(f.srv.DeviceGetHandleByUUIDCalls())
			sample(t, b)
			if got := len(f.srv.DeviceGetHandleByUUIDCalls()) > before; got != tc.reacqd {
				t.Errorf("handle re-acquired: %v, want %v", got, tc.reacqd)
			}
		})
	}
}

// Codes about one reading leave the GPU up through 10 minutes of samples
// (it was down in every one: VGPUDeviceDown fired on a GPU whose power
// read fine), logged once.
func TestReadingErrorsOverTime(t *testing.T) {
	for _, tc := range []struct {
		call string
		ret  nvml.Return
	}{
		{"GetFieldValues", nvml.ERROR_OPERATING_SYSTEM},
		{"GetRemappedRows", nvml.ERROR_UNKNOWN},
		{"GetPcieReplayCounter", nvml.ERROR_NO_DATA},
		{"GetTemperature", nvml.ERROR_CORRUPTED_INFOROM},
	} {
		t.Run(tc.call, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.fail(0, tc.call, tc.ret)
			b := f.backend()
			for i := 0; i < 120; i++ { // 10 minutes at 5 s
				if d := sample(t, b).Devices[0]; !d.Up || d.PowerWatts == nil {
					t.Fatalf("sample %d: up=%v power %v (err %q)", i, d.Up, d.PowerWatts, d.Err)
				}
				f.clock.Advance(5 * time.Second)
			}
			if n := f.logs.count(returnName(tc.ret)); n != 1 {
				t.Errorf("%d log lines with %s, want 1:\n%s", n, returnName(tc.ret), f.logs.String())
			}
		})
	}
}

// ERROR_MEMORY from nvmlGpmSampleAlloc (host memory short) took every GPU
// down in that sample: now GPM gives no ratio then, and every GPU is up.
func TestGPMAllocHostMemoryShort(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	b := f.backend()
	sample(t, b)
	f.clock.Advance(time.Second)
	good := f.srv.GpmSampleAllocFunc
	f.srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) { return nil, nvml.ERROR_MEMORY }
	for i, d := range sample(t, b).Devices {
		if !d.Up || d.Activity.SMActive != nil {
			t.Errorf("GPU %d: up=%v SM active %v (err %q); want up, no ratio", i, d.Up, d.Activity.SMActive, d.Err)
		}
	}
	f.srv.GpmSampleAllocFunc = good
	f.clock.Advance(time.Second)
	sample(t, b)
	f.clock.Advance(time.Second)
	for i, d := range sample(t, b).Devices {
		if !d.Up || d.Activity.SMActive == nil {
			t.Errorf("GPU %d after: up=%v SM active %v", i, d.Up, d.Activity.SMActive)
		}
	}
	if n := f.logs.count("call=nvmlGpmSampleAlloc", "ERROR_MEMORY"); n != len(f.devs) {
		t.Errorf("%d log lines of the failed allocation, want one per GPU (%d)", n, len(f.devs))
	}
}

// A GPU whose every figure fails with UNKNOWN while its UUID (and its
// modes) answer, as a library answering them from what it holds would,
// stayed up with every series absent, VGPUDeviceDown never firing: it is
// down, the error naming the calls, and up again once they answer. One
// figure read, or the figures refused with codes that say why, keep it up.
func TestEveryFigureUnknownIsDown(t *testing.T) {
	figures := []string{"GetMemoryInfo", "GetMemoryInfo_v2", "GetClockInfo", "GetPowerUsage", "GetTemperature", "GetUtilizationRates", "GetTotalEnergyConsumption"}
	for _, tc := range []struct {
		name  string
		ret   nvml.Return
		spare string // a figure's call left answering
		up    bool
	}{
		{"every figure unknown", nvml.ERROR_UNKNOWN, "", false},
		{"temperature answers", nvml.ERROR_UNKNOWN, "GetTemperature", true},
		{"every figure not supported", nvml.ERROR_NOT_SUPPORTED, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			const bad = 2
			b := f.backend()
			sample(t, b)
			for _, c := range figures {
				if c != tc.spare {
					f.fail(bad, c, tc.ret)
				}
			}
			f.clock.Advance(time.Second)
			d := sample(t, b).Devices[bad]
			if d.Up != tc.up {
				t.Fatalf("up=%v, want %v (err %q)", d.Up, tc.up, d.Err)
			}
			if !tc.up {
				for _, s := range []string{"nvmlDeviceGetMemoryInfo", "does not tell"} {
					if !strings.Contains(d.Err, s) {
						t.Errorf("err %q lacks %q", d.Err, s)
					}
				}
			}
			if o := sample(t, b).Devices[0]; !o.Up {
				t.Errorf("GPU 0 down: %q", o.Err)
			}
			for _, c := range figures {
				f.fail(bad, c, nvml.SUCCESS)
			}
			f.clock.Advance(backoffBase + time.Second)
			if d := sample(t, b).Devices[bad]; !d.Up || d.TemperatureC == nil {
				t.Errorf("after the figures answer again: up=%v temperature %v (err %q)", d.Up, d.TemperatureC, d.Err)
			}
		})
	}
}
