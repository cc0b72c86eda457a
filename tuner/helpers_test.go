package tuner

import (
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// The fakes and builders shared with the other tuner packages' tests.
var (
	t0       = tunertest.T0
	mpsProc  = tunertest.MPSProc
	snapshot = tunertest.Snapshot
)

type (
	fakeControl = tunertest.FakeControl
	migHost     = tunertest.MIGHost
)
