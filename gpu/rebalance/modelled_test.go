package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// recorder is a fake orchestrator hook and simulator: it records the plans
// and moves it is given and answers with its errors.
type recorder struct {
	plans   []gpu.Plan
	moves   []string
	hookErr error
	moveErr error
}

func (r *recorder) Rebalance(_ context.Context, p gpu.Plan) error {
	r.plans = append(r.plans, p)
	return r.hookErr
}

func (r *recorder) MoveProcess(_ context.Context, pid uint32, to string) error {
	r.moves = append(r.moves, fmt.Sprintf("%d->%s", pid, to))
	return r.moveErr
}

func TestModelled(t *testing.T) {
	pidMove := podMove
	pidMove.PID = 4242
	second := gpu.Move{Tenant: "batch", PID: 4343, FromUUID: "GPU-0", ToUUID: "GPU-2", Pod: &gpu.Pod{Namespace: "jobs", Name: "batch-0"}}
	twoProcs := pidMove
	twoProcs.PIDs = []uint32{4242, 4250}
	third := gpu.Move{Tenant: "etl", PID: 4444, FromUUID: "GPU-0", ToUUID: "GPU-3", Pod: &gpu.Pod{Namespace: "jobs", Name: "etl-0"}}
	budget := errors.New("eviction of serving/llm-a-7d9f: refused for now: a PodDisruptionBudget allows no disruption")
	for _, tc := range []struct {
		name        string
		plan        gpu.Plan
		hookErr     error
		moveErr     error
		wantPlans   int
		wantMoves   []string
		err         string
		unsupported bool  // the error is gpu.ErrNotSupported
		applied     []int // the moves the error (a *gpu.PartialError) says were made
	}{
		{name: "applied, then modelled", plan: gpu.Plan{Moves: []gpu.Move{pidMove}}, wantPlans: 1, wantMoves: []string{"4242->GPU-1"}},
		{name: "every process of a workload modelled", plan: gpu.Plan{Moves: []gpu.Move{twoProcs, second}}, wantPlans: 1,
			wantMoves: []string{"4242->GPU-1", "4250->GPU-1", "4343->GPU-2"}},
		{name: "every move modelled in order", plan: gpu.Plan{Moves: []gpu.Move{pidMove, second}}, wantPlans: 1, wantMoves: []string{"4242->GPU-1", "4343->GPU-2"}},
		{name: "refused by the hook: nothing modelled", plan: gpu.Plan{Moves: []gpu.Move{pidMove}}, hookErr: budget, wantPlans: 1, err: "PodDisruptionBudget"},
		{name: "applied in part: the applied moves modelled", plan: gpu.Plan{Moves: []gpu.Move{pidMove, second, third}},
			hookErr: &gpu.PartialError{Applied: []int{0, 2}, Err: budget}, wantPlans: 1, wantMoves: []string{"4242->GPU-1", "4444->GPU-3"}, err: "PodDisruptionBudget", applied: []int{0, 2}},
		{name: "applied in part, the first refused", plan: gpu.Plan{Moves: []gpu.Move{pidMove, second}},
			hookErr: &gpu.PartialError{Applied: []int{1}, Err: budget}, wantPlans: 1, wantMoves: []string{"4343->GPU-2"}, err: "PodDisruptionBudget", applied: []int{1}},
		{name: "applied in part, the model fails", plan: gpu.Plan{Moves: []gpu.Move{pidMove, second}}, moveErr: errors.New("no room"),
			hookErr: &gpu.PartialError{Applied: []int{1}, Err: budget}, wantPlans: 1, wantMoves: []string{"4343->GPU-2"}, err: "could not model the move of batch (PID 4343) to GPU-2: no room",
			applied: []int{1}},
		{name: "applied in part on a dry run: nothing modelled", plan: gpu.Plan{DryRun: true, Moves: []gpu.Move{pidMove, second}},
			hookErr: &gpu.PartialError{Applied: []int{1}, Err: budget}, wantPlans: 1, err: "PodDisruptionBudget", applied: []int{1}},
		{name: "dry run: the hook's alone", plan: gpu.Plan{DryRun: true, Moves: []gpu.Move{pidMove}}, wantPlans: 1},
		{name: "the model fails after the hook", plan: gpu.Plan{Moves: []gpu.Move{pidMove}}, moveErr: errors.New("no room"), wantPlans: 1,
			wantMoves: []string{"4242->GPU-1"}, err: "the hook applied the move, but the simulator could not model the move of llm-a (PID 4242) to GPU-1: no room",
			applied: []int{0}},
		{name: "the model fails after the hook applied every move", plan: gpu.Plan{Moves: []gpu.Move{pidMove, second}}, moveErr: errors.New("no room"), wantPlans: 1,
			wantMoves: []string{"4242->GPU-1"}, err: "could not model the move of llm-a (PID 4242) to GPU-1: no room", applied: []int{0, 1}},
		{name: "MIG layouts: refused before the hook", plan: gpu.Plan{MIG: []gpu.MIGLayoutPlan{{UUID: "GPU-0", Profiles: []string{"3g.40gb"}}}},
			err: "1 MIG layout changes", unsupported: true},
		{name: "a move without a PID: refused before the hook", plan: gpu.Plan{Moves: []gpu.Move{podMove}}, err: `move 1 (tenant "llm-a") names no PID`, unsupported: true},
		{name: "a move without a target: refused before the hook", plan: gpu.Plan{Moves: []gpu.Move{{Tenant: "x", PID: 1, FromUUID: "GPU-0", Pod: podMove.Pod}}},
			err: "no target GPU", unsupported: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{hookErr: tc.hookErr, moveErr: tc.moveErr}
			err := Modelled{Hook: r, Model: r}.Rebalance(context.Background(), tc.plan)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			if got := errors.Is(err, gpu.ErrNotSupported); got != tc.unsupported {
				t.Errorf("errors.Is(%v, gpu.ErrNotSupported) = %v, want %v", err, got, tc.unsupported)
			}
			var partial *gpu.PartialError
			var made []int // (nil: no *gpu.PartialError)
			if errors.As(err, &partial) {
				made = partial.Applied
			}
			if !slices.Equal(made, tc.applied) {
				t.Errorf("error %v: moves made %v, want %v", err, made, tc.applied)
			}
			if tc.hookErr != nil && !errors.Is(err, tc.hookErr) {
				t.Errorf("error %v does not wrap the hook's", err)
			}
			if len(r.plans) != tc.wantPlans {
				t.Errorf("hook ran %d times, want %d", len(r.plans), tc.wantPlans)
			}
			if !slices.Equal(r.moves, tc.wantMoves) {
				t.Errorf("modelled moves %v, want %v", r.moves, tc.wantMoves)
			}
		})
	}
}
