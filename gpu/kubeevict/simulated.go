package kubeevict

import (
	"errors"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/rebalance"
)

// ErrNoModel is returned by OnSimulator when none of the simulator's
// actuators moves processes.
var ErrNoModel = errors.New("the simulator moves no processes")

// OnSimulator returns the rebalancing hook of the simulator backend: an
// Evictor for opts, which acts on pods through the API server and never
// on the host's GPUs or processes, with each move it applies then
// modelled in the first of the simulator's actuators that moves
// processes (rebalance.Modelled), so that the chart run with backend sim
// moves real pods. A hook program has no such counterpart: it may act on
// the PIDs of the plan, which are simulated there.
func OnSimulator(opts Options, actuators ...any) (rebalance.Modelled, error) {
	var model gpu.PlacementActuator
	for _, a := range actuators {
		if p, ok := a.(gpu.PlacementActuator); ok {
			model = p
			break
		}
	}
	if model == nil {
		return rebalance.Modelled{}, ErrNoModel
	}
	e, err := New(opts)
	if err != nil {
		return rebalance.Modelled{}, err
	}
	return rebalance.Modelled{Hook: e, Model: model}, nil
}
