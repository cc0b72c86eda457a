package tuner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A round on a snapshot older than StaleAfter (sampling stalled) asks the
// policy nothing, feeds the fast SLO window no point and says why on every
// GPU, logged once; the kill switch still thaws a pause in force; the
// first new sample has the policy decide again.
func TestStaleSnapshotHolds(t *testing.T) {
	ctx := context.Background()
	rec := &pauseRecorder{}
	clk := gpu.NewManualClock(t0)
	kill := &KillSwitch{}
	asked := 0
	policy := deciderFunc(func(*State) []Action {
		asked++
		return []Action{pauseAction("train", gpu.ClassBatch, 0, Duty(0.1*float64(asked)))}
	})
	var logged bytes.Buffer
	tu, err := New(Options{Policy: policy, Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Clock: clk,
		Mode: ModeEnforce, StaleAfter: 10 * time.Second, Logger: log.NewLogfmtLogger(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	withSLO := func(s *tenant.Snapshot, requests float64) *tenant.Snapshot {
		s.SLOs = []tenant.SLOStatus{{Tenant: "chat", Status: latency.Status{Quantile: 0.99, GoodKnown: true, RequestsTotal: requests, GoodRequestsTotal: requests}}}
		return s
	}
	last := withSLO(trainSnap(t0, gpu.ClassBatch, 7, 8), 100)
	round := func() []Decision {
		t.Helper()
		out, err := tu.RunOnce(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	round()
	if asked != 1 || len(rec.Calls) != 1 {
		t.Fatalf("fresh snapshot: asked %d, calls %q", asked, rec.Calls)
	}
	points := len(tu.fast.points["chat"])

	for i := range 3 { // the same sample, 15s, 30s and 45s old
		clk.Advance(15 * time.Second)
		if out := round(); len(out) != 0 || asked != 1 {
			t.Fatalf("stale round %d: asked %d, decisions %v", i, asked, out)
		}
	}
	if n := len(tu.fast.points["chat"]); n != points {
		t.Errorf("stale rounds added %d points to the fast window", n-points)
	}
	st := tu.Status()
	if len(st.GPUs) != 1 || st.GPUs[0].Kind != RoundStale || !strings.Contains(st.GPUs[0].Why, "no new sample for 45s") {
		t.Errorf("stale rounds' GPU lines %+v, want stale with the sample's age", st.GPUs)
	}
	if n := strings.Count(logged.String(), "tuner holding: no new sample"); n != 1 {
		t.Errorf("the hold logged %d times, want once:\n%s", n, logged.String())
	}

	kill.Engaged.Store(true)
	clk.Advance(15 * time.Second)
	round()
	if got := rec.Calls[len(rec.Calls)-1]; !strings.HasSuffix(got, ",0)") {
		t.Errorf("kill switch on a stale snapshot: last call %q, want the thaw", got)
	}
	kill.Engaged.Store(false)

	clk.Advance(15 * time.Second)
	last = withSLO(trainSnap(clk.Now(), gpu.ClassBatch, 7, 8), 200)
	round()
	if asked != 2 || tu.Status().GPUs[0].Kind == RoundStale || !strings.Contains(logged.String(), "decides again") {
		t.Errorf("new sample: asked %d, round %+v, log:\n%s", asked, tu.Status().GPUs, logged.String())
	}
}

// A round is stale only on a snapshot no newer than the last round's and
// older than StaleAfter: without StaleAfter, a previous round or a time,
// never; a slow sampler's sample, old when it comes but new since the
// last round, holds nothing.
func TestStaleAgeOff(t *testing.T) {
	at := func(d time.Duration) *tenant.Snapshot { return &tenant.Snapshot{Time: t0.Add(d)} }
	now := t0.Add(time.Hour)
	for _, c := range []struct {
		name       string
		after      time.Duration
		prev, snap *tenant.Snapshot
		want       time.Duration
	}{
		{"off", 0, at(0), at(0), 0},
		{"first round", time.Second, nil, at(0), 0},
		{"no time", time.Second, &tenant.Snapshot{}, &tenant.Snapshot{}, 0},
		{"the same sample, fresh", 2 * time.Hour, at(0), at(0), 0},
		{"the same sample, at the limit", time.Hour, at(0), at(0), 0},
		{"the same sample, stale", time.Second, at(0), at(0), time.Hour},
		{"an older sample, stale", time.Second, at(time.Minute), at(0), time.Hour},
		{"a new sample, old when it came", time.Second, at(0), at(time.Minute), 0},
	} {
		tu := &Tuner{o: Options{StaleAfter: c.after}}
		if got := tu.staleAge(c.prev, c.snap, now); got != c.want {
			t.Errorf("%s: staleAge %v, want %v", c.name, got, c.want)
		}
	}
}

// noPlan is a slow loop that never plans.
type noPlan struct{}

func (noPlan) Period() time.Duration              { return time.Hour }
func (noPlan) MoveHold() time.Duration            { return time.Hour }
func (noPlan) Missing(*State) map[string]bool     { return nil }
func (noPlan) Squeezed(*State) map[string]float64 { return nil }
func (noPlan) PlanRebalance(*State, RebalanceInput) (gpu.Plan, bool) {
	return gpu.Plan{}, false
}

// A MIG relayout under way when sampling stalls goes on: given up at its
// timeout (the instances never drain), the processes it stopped are
// started again, as without a stale snapshot.
func TestStaleRoundsFinishRelayout(t *testing.T) {
	for _, staleAfter := range []time.Duration{0, 10 * time.Second} {
		host := &migHost{Busy: 1 << 30}
		clock := gpu.NewManualClock(t0)
		once := 0
		pol := deciderFunc(func(*State) []Action {
			if once++; once == 1 {
				return []Action{relayoutOf("GPU-m")}
			}
			return nil
		})
		tu, err := New(Options{Policy: pol, Actuators: ActuatorsOf(host), Clock: clock, Mode: ModeEnforce, Rebalance: noPlan{}, StaleAfter: staleAfter})
		if err != nil {
			t.Fatal(err)
		}
		snap := snapshot(t0, []gpu.Device{migDev("GPU-m", 1)}, nil)
		if _, err := tu.RunOnce(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
		if !tu.Underway() {
			t.Fatal("no relayout under way")
		}
		for range 30 { // 5 minutes of rounds on the last sample
			clock.Advance(10 * time.Second)
			_, _ = tu.RunOnce(context.Background(), snap)
		}
		if tu.Underway() || !slices.Contains(host.Calls, "start 1") {
			t.Errorf("StaleAfter %v: under way %v after 5 minutes (timeout %v), calls %q", staleAfter, tu.Underway(), relayoutTimeout, host.Calls)
		}
	}
}

// The tuner holds on a snapshot five sample intervals old, never sooner
// than 10s.
func TestStaleAfter(t *testing.T) {
	for _, c := range []struct{ sample, want time.Duration }{
		{100 * time.Millisecond, 10 * time.Second},
		{time.Second, 10 * time.Second},
		{5 * time.Second, 25 * time.Second},
		{time.Minute, 5 * time.Minute},
	} {
		if got := StaleAfterFor(c.sample); got != c.want {
			t.Errorf("StaleAfterFor(%v) = %v, want %v", c.sample, got, c.want)
		}
	}
}
