package autotune

import (
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

const uuid0 = "GPU-0"

// The builders shared with the other tuner packages' tests.
var (
	t0       = tunertest.T0
	mpsProc  = tunertest.MPSProc
	snapshot = tunertest.Snapshot
)
