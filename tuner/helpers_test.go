package tuner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// fakeControl records the calls a policy makes and answers with the errors
// configured per method. It has the actuators the baselines use.
type fakeControl struct {
	calls []string
	errs  map[string]error // method name -> error
}

func (f *fakeControl) do(method, args string) error {
	f.calls = append(f.calls, method+"("+args+")")
	return f.errs[method]
}

func (f *fakeControl) SetMPSActiveThreads(_ context.Context, uuid string, pid uint32, fr float64) error {
	return f.do("SetMPSActiveThreads", fmt.Sprintf("%s,%d,%.4f", uuid, pid, fr))
}
func (f *fakeControl) RestartClient(_ context.Context, uuid string, pid uint32, _ string) error {
	return f.do("RestartClient", fmt.Sprintf("%s,%d", uuid, pid))
}
func (f *fakeControl) SetVGPUScheduler(_ context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	return f.do("SetVGPUScheduler", uuid+","+string(s.Policy))
}
func (f *fakeControl) SetComputeTimeSlice(_ context.Context, uuid string, level gpu.TimeSliceLevel) error {
	return f.do("SetComputeTimeSlice", uuid+","+string(level))
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mpsProc(pid uint32, frac *float64) gpu.Process {
	p := testutil.Proc(pid, "")
	p.Type, p.MPSActiveThreads = gpu.ProcessMPS, frac
	return p
}

func snapshot(at time.Time, devs []gpu.Device, usage []tenant.Usage) *tenant.Snapshot {
	return &tenant.Snapshot{Time: at, Readings: &gpu.Readings{Time: at, Backend: "test", Devices: devs}, Usage: usage}
}

// migHost drains, relayouts (busy the first busy times) and starts.
type migHost struct {
	calls []string
	busy  int // ConfigureMIG answers ErrBusy this many times
	// drainErr and startErr, when set, are what every drain and start
	// answers
	drainErr, startErr error
	// startFails: the first startFails starts fail (before startErr)
	startFails int
}

func (m *migHost) DrainMIGInstance(_ context.Context, uuid, inst string) error {
	m.calls = append(m.calls, "drain "+inst)
	return m.drainErr
}

func (m *migHost) ConfigureMIG(_ context.Context, uuid string, profiles []string) error {
	if m.busy > 0 {
		m.busy--
		return fmt.Errorf("processes running: %w", gpu.ErrBusy)
	}
	m.calls = append(m.calls, "configure "+strings.Join(profiles, " "))
	return nil
}

func (m *migHost) StopProcess(context.Context, uint32) error { return nil }

func (m *migHost) StartProcess(_ context.Context, pid uint32) error {
	m.calls = append(m.calls, fmt.Sprintf("start %d", pid))
	if m.startFails > 0 {
		m.startFails--
		return errors.New("start failed")
	}
	return m.startErr
}
