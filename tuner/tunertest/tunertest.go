// Package tunertest holds the fakes and builders the tests of the tuner's
// engine and policies share (test files only: see TestLayering).
package tunertest

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

// T0 is the tests' start of time.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// MPSProc is an MPS client process with the active-thread fraction frac
// (nil: none set).
func MPSProc(pid uint32, frac *float64) gpu.Process {
	p := testutil.Proc(pid, "")
	p.Type, p.MPSActiveThreads = gpu.ProcessMPS, frac
	return p
}

// Snapshot is a snapshot at at of devs with usage.
func Snapshot(at time.Time, devs []gpu.Device, usage []tenant.Usage) *tenant.Snapshot {
	return &tenant.Snapshot{Time: at, Readings: &gpu.Readings{Time: at, Backend: "test", Devices: devs}, Usage: usage}
}

// FakeControl records the calls a policy makes and answers with the errors
// configured per method. It has the actuators the baselines use.
type FakeControl struct {
	Calls []string
	Errs  map[string]error // method name -> error
	// NoRestartHook, when set, is why the MPS knobs are withheld
	// (gpu.KnobWithholder), as by an MPS controller without a restart hook.
	NoRestartHook string
}

// Withheld says NoRestartHook of the MPS knobs.
func (f *FakeControl) Withheld(_ string, k gpu.Knob) string {
	if k != gpu.KnobMPSActiveThreads && k != gpu.KnobMPSPinnedMemory {
		return ""
	}
	return f.NoRestartHook
}

// Do records a call of method with args and answers its configured error.
func (f *FakeControl) Do(method, args string) error {
	f.Calls = append(f.Calls, method+"("+args+")")
	return f.Errs[method]
}

// SetMPSActiveThreads records the call.
func (f *FakeControl) SetMPSActiveThreads(_ context.Context, uuid string, pid uint32, fr float64) error {
	return f.Do("SetMPSActiveThreads", fmt.Sprintf("%s,%d,%.4f", uuid, pid, fr))
}

// RestartClient records the call.
func (f *FakeControl) RestartClient(_ context.Context, uuid string, pid uint32, _ string) error {
	return f.Do("RestartClient", fmt.Sprintf("%s,%d", uuid, pid))
}

// SetVGPUScheduler records the call.
func (f *FakeControl) SetVGPUScheduler(_ context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	return f.Do("SetVGPUScheduler", uuid+","+string(s.Policy))
}

// SetComputeTimeSlice records the call.
func (f *FakeControl) SetComputeTimeSlice(_ context.Context, uuid string, level gpu.TimeSliceLevel) error {
	return f.Do("SetComputeTimeSlice", uuid+","+string(level))
}

// MIGHost drains, relayouts (busy the first Busy times) and starts.
type MIGHost struct {
	Calls []string
	Busy  int // ConfigureMIG answers ErrBusy this many times
	// DrainErr and StartErr, when set, are what every drain and start
	// answers
	DrainErr, StartErr error
	// StartFails: the first StartFails starts fail (before StartErr)
	StartFails int
}

// DrainMIGInstance records the drain.
func (m *MIGHost) DrainMIGInstance(_ context.Context, uuid, inst string) error {
	m.Calls = append(m.Calls, "drain "+inst)
	return m.DrainErr
}

// ConfigureMIG records the layout, or answers busy.
func (m *MIGHost) ConfigureMIG(_ context.Context, uuid string, profiles []string) error {
	if m.Busy > 0 {
		m.Busy--
		return fmt.Errorf("processes running: %w", gpu.ErrBusy)
	}
	m.Calls = append(m.Calls, "configure "+strings.Join(profiles, " "))
	return nil
}

// StopProcess does nothing.
func (m *MIGHost) StopProcess(context.Context, uint32) error { return nil }

// StartProcess records the start and fails as configured.
func (m *MIGHost) StartProcess(_ context.Context, pid uint32) error {
	m.Calls = append(m.Calls, fmt.Sprintf("start %d", pid))
	if m.StartFails > 0 {
		m.StartFails--
		return errors.New("start failed")
	}
	return m.StartErr
}
