package tuner

import "github.com/vgpu-exporter/vgpu_exporter/tenant"

// MPSClientState is what an MPS actuator knows of one client: the
// fraction set for its next context (pending) and its running context's
// (effective), each nil when unknown.
type MPSClientState struct {
	UUID      string
	PID       uint32
	Pending   *float64
	Effective *float64
}

// MPSStateSource reports the MPS actuator's pending and effective
// fractions (on a real host, the MPS control daemon's controller). It is
// given each snapshot first, so that it may take the effective fractions
// the readings report.
type MPSStateSource interface {
	MPSStates(snap *tenant.Snapshot) []MPSClientState
}
