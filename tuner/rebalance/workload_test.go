package rebalance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// inWorkloads gives the processes of st's usages the workloads ws (by
// PID, ascending) and returns st.
func inWorkloads(st *tuner.State, ws ...tenant.Workload) *tuner.State {
	for i := range st.Snapshot.Usage {
		u := &st.Snapshot.Usage[i]
		for _, w := range ws {
			if slices.Contains(u.PIDs, w.PID) {
				u.Workloads = append(u.Workloads, w)
			}
		}
	}
	return st
}

// withUnassigned adds to st a process of no tenant, PID pid on GPU-a.
func withUnassigned(st *tuner.State, pid uint32) *tuner.State {
	st.Snapshot.Usage = append(st.Snapshot.Usage, tenant.Usage{Tenant: tenant.Unassigned, UUID: "GPU-a", PIDs: []uint32{pid}, MemoryUsedBytes: gib})
	return st
}

// A tenant is attributed per process but moved per workload: a helper in
// chat's pod (another container, another executable) can be train's by
// a container or executable selector. The planner moves no tenant whose
// pod or systemd service runs a process of another tenant, or of none:
// the eviction or the restart would stop that process too, here chat's,
// the latency tenant the move is meant to relieve. The next candidate
// moves instead, and the violator, sharing its pod, does not move
// either; so for a squeezed tenant.
func TestPlanSparesSharedWorkloads(t *testing.T) {
	now := t0.Add(time.Hour)
	missing := tuner.RebalanceInput{MissingSince: map[string]time.Time{"chat": now.Add(-5 * time.Minute)}}
	held := func(names ...string) tuner.RebalanceInput {
		in := tuner.RebalanceInput{MissingSince: missing.MissingSince, Moved: map[string]time.Time{}}
		for _, n := range names {
			in.Moved[n] = now
		}
		return in
	}
	chatPod, trainPod := &gpu.Pod{Namespace: "llm", Name: "chat-0"}, &gpu.Pod{Namespace: "research", Name: "train-0"}
	hot := func() *tuner.State { return rebalanceState(0.3, 0.2, 40*gib, 0.9) }
	tests := []struct {
		name string
		st   *tuner.State
		in   tuner.RebalanceInput
		want string // "tenant [pids] workload from->to, ..." or "" for no plan
	}{
		{"train in a pod of its own: train moves", inWorkloads(hot(), tenant.Workload{PID: 10, Pod: chatPod}, tenant.Workload{PID: 20, Pod: trainPod}, tenant.Workload{PID: 21, Pod: trainPod}), missing,
			"train [20 21] research/train-0 GPU-a->GPU-c"},
		{"a helper of train's in chat's pod: embed moves instead", inWorkloads(hot(), tenant.Workload{PID: 10, Pod: chatPod}, tenant.Workload{PID: 20, Pod: chatPod}, tenant.Workload{PID: 21, Pod: trainPod}), missing,
			"embed [30]  GPU-a->GPU-c"},
		{"embed held: no move, chat itself shares its pod with train", inWorkloads(hot(), tenant.Workload{PID: 10, Pod: chatPod}, tenant.Workload{PID: 20, Pod: chatPod}, tenant.Workload{PID: 21, Pod: trainPod}), held("embed"),
			""},
		{"train and embed held, chat's pod its own: chat moves", inWorkloads(hot(), tenant.Workload{PID: 10, Pod: chatPod}, tenant.Workload{PID: 20, Pod: trainPod}), held("train", "embed"),
			"chat [10] llm/chat-0 GPU-a->GPU-c"},
		{"a systemd service of chat's and train's: embed moves", inWorkloads(hot(), tenant.Workload{PID: 10, Unit: "llm.service"}, tenant.Workload{PID: 21, Unit: "llm.service"}), missing,
			"embed [30]  GPU-a->GPU-c"},
		{"train's pod runs a process of no tenant: embed moves", inWorkloads(withUnassigned(hot(), 40), tenant.Workload{PID: 20, Pod: trainPod}, tenant.Workload{PID: 40, Pod: trainPod}), missing,
			"embed [30]  GPU-a->GPU-c"},
		{"squeezed train in a pod of its own: moves", inWorkloads(squeezedState(), tenant.Workload{PID: 10, Pod: chatPod}, tenant.Workload{PID: 20, Pod: trainPod}, tenant.Workload{PID: 21, Pod: trainPod}), squeezedSince(now),
			"train [20 21] research/train-0 GPU-a->GPU-c"},
		{"squeezed train with a helper in chat's pod: no move", inWorkloads(squeezedState(), tenant.Workload{PID: 10, Pod: chatPod}, tenant.Workload{PID: 20, Pod: chatPod}, tenant.Workload{PID: 21, Pod: trainPod}), squeezedSince(now),
			""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := Default().PlanRebalance(tc.st, tc.in)
			var got []string
			for _, m := range p.Moves {
				w := m.Unit
				if m.Pod != nil {
					w = m.Pod.Namespace + "/" + m.Pod.Name
				}
				got = append(got, fmt.Sprintf("%s %v %s %s->%s", m.Tenant, m.Processes(), w, m.FromUUID, m.ToUUID))
			}
			if g := strings.Join(got, ", "); g != tc.want || ok != (tc.want != "") {
				t.Fatalf("plan %q (%v), want %q", g, ok, tc.want)
			}
		})
	}
}
