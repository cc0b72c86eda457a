package tuner

import (
	"context"
	"fmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// MPSClients is what a policy needs of MPS: set a client's active-thread
// fraction, then restart the client so that the fraction takes effect (MPS
// applies it to new contexts only). Every gpu.MPSActuator is one.
type MPSClients interface {
	SetMPSActiveThreads(ctx context.Context, uuid string, pid uint32, fraction float64) error
	RestartClient(ctx context.Context, uuid string, pid uint32) error
}

var _ MPSClients = gpu.MPSActuator(nil)

// Actuators are the mechanisms a policy acts through. A nil field is a
// mechanism the host lacks: a change that needs it is not applied, as not
// supported (gpu.ErrNotSupported), like a change the GPU itself refuses.
type Actuators struct {
	MPS           MPSClients
	VGPUScheduler gpu.VGPUSchedulerActuator
	TimeSlice     gpu.TimeSliceActuator
	ClockPower    gpu.ClockPowerActuator
}

// ActuatorsOf returns the actuators the backends implement; where several
// implement the same mechanism, the first one is used.
func ActuatorsOf(backends ...any) Actuators {
	var a Actuators
	for _, b := range backends {
		if m, ok := b.(MPSClients); ok && a.MPS == nil {
			a.MPS = m
		}
		if v, ok := b.(gpu.VGPUSchedulerActuator); ok && a.VGPUScheduler == nil {
			a.VGPUScheduler = v
		}
		if t, ok := b.(gpu.TimeSliceActuator); ok && a.TimeSlice == nil {
			a.TimeSlice = t
		}
		if c, ok := b.(gpu.ClockPowerActuator); ok && a.ClockPower == nil {
			a.ClockPower = c
		}
	}
	return a
}

// notSupported is the error of a change whose mechanism the host lacks.
func notSupported(k gpu.Knob) error {
	return fmt.Errorf("no backend of this host drives %s: %w", k, gpu.ErrNotSupported)
}
