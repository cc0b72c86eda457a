package rebalance

import (
	"context"
	"errors"
	"fmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Modelled applies rebalancing plans where the workloads are real and the
// GPUs simulated: the simulator backend run beside real pods (the Helm
// chart with backend sim). Each plan goes to Hook, the orchestrator's side
// (the built-in Kubernetes eviction: the real pod is evicted and its
// controller recreates it); once Hook has applied the whole plan, each
// move is made in Model, the simulator, by its PIDs, so that the simulated
// GPUs follow what the orchestrator did. A plan the hook refuses or fails
// changes nothing in the model, except the moves a gpu.PartialError says
// the hook made; a dry run is the hook's alone. A move the model fails to
// make after the hook applied the whole plan fails the plan with a
// gpu.PartialError naming all its moves: the orchestrator made them.
//
// Only moves are modelled: a plan with MIG layouts is refused before the
// hook runs (on Kubernetes they belong to the GPU Operator's MIG manager),
// as is a move without the PID and target GPU the model needs.
type Modelled struct {
	Hook  gpu.Rebalancer
	Model gpu.PlacementActuator
}

var _ gpu.Rebalancer = Modelled{}

// Rebalance hands p to the hook and then, unless it is a dry run, makes
// its moves in the model.
func (m Modelled) Rebalance(ctx context.Context, p gpu.Plan) error {
	if len(p.MIG) > 0 {
		return fmt.Errorf("rebalancing on the simulator: %d MIG layout changes: only moves are modelled: %w", len(p.MIG), gpu.ErrNotSupported)
	}
	for i, mv := range p.Moves {
		if mv.PID == 0 || mv.ToUUID == "" {
			return fmt.Errorf("rebalancing on the simulator: move %d (tenant %q) names no PID or no target GPU to model it by: %w", i+1, mv.Tenant, gpu.ErrNotSupported)
		}
	}
	err := m.Hook.Rebalance(ctx, p)
	if p.DryRun {
		return err
	}
	applied := p.Moves
	if err != nil {
		// A plan applied in part: the moves the hook made are modelled
		// too, else the simulator keeps pods the orchestrator moved.
		var partial *gpu.PartialError
		if !errors.As(err, &partial) {
			return err
		}
		applied = nil
		for _, i := range partial.Applied {
			if i >= 0 && i < len(p.Moves) {
				applied = append(applied, p.Moves[i])
			}
		}
	}
	for _, mv := range applied {
		if merr := m.model(ctx, mv); merr != nil {
			if err == nil {
				// the hook applied the whole plan: its moves were made,
				// and are held as made (a plain error said nothing was)
				all := make([]int, len(p.Moves))
				for i := range all {
					all[i] = i
				}
				return &gpu.PartialError{Applied: all, Err: merr}
			}
			return errors.Join(err, merr)
		}
	}
	return err
}

// model makes one move the hook applied in the simulator: every process
// of the workload moves, as the orchestrator moved the workload whole.
func (m Modelled) model(ctx context.Context, mv gpu.Move) error {
	for _, pid := range mv.Processes() {
		if err := m.Model.MoveProcess(ctx, pid, mv.ToUUID); err != nil {
			return fmt.Errorf("the hook applied the move, but the simulator could not model the move of %s (PID %d) to %s: %w", mv.Tenant, pid, mv.ToUUID, err)
		}
	}
	return nil
}
