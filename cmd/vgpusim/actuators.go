package main

import (
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// guardedActuators are the actuators a policy gets: the simulator's, each
// behind the forwarding type of its entry in the tuner's mechanism table,
// which exposes that actuator interface and nothing else: a policy cannot
// type-assert its way from an actuator to the simulator (or to another
// mechanism) and read the ground truth it is judged by.
func guardedActuators(s *sim.Simulator) tuner.Actuators { return tuner.SealedActuatorsOf(s) }
