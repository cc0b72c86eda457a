package autotune

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

const uuid0 = "GPU-0"

// The builders shared with the other tuner packages' tests.
var (
	t0       = tunertest.T0
	mpsProc  = tunertest.MPSProc
	snapshot = tunertest.Snapshot
)

// checkActions fails t unless acts set exactly want (target=value, in
// order) and, where reason is not empty, the first one's reason holds it.
func checkActions(t *testing.T, acts []tuner.Action, want []string, reason string) {
	t.Helper()
	var got []string
	for _, a := range acts {
		got = append(got, a.Target.String()+"="+a.Want.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	if reason != "" && !strings.Contains(acts[0].Reason, reason) {
		t.Errorf("reason %q, want %q in it", acts[0].Reason, reason)
	}
}

// runningSince is the policy New makes, its first decision taken at at
// (on a host without GPUs): it has run since then, and a GPU none of
// whose latency tenants it has seen is not one a tenant may have been on
// before it started, once that tenant's SLO window has passed since at.
func runningSince(at time.Time) *Autotune {
	p := New()
	p.Decide(&tuner.State{Now: at, Snapshot: snapshot(at, nil, nil)})
	return p
}
