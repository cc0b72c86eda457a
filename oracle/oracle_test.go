package oracle

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

func TestOracleLayoutCandidates(t *testing.T) {
	src := func(layout string, memA, memB string) string {
		return `name: m
gpus: [{model: H100-SXM5-80GB, sharing: mig, mig: [` + layout + `]}]
tenants:
  - {name: a, mig_instance: 0, memory: ` + memA + `, workload: {type: training, flops: 1e12}}
  - {name: b, mig_instance: 1, memory: ` + memB + `, workload: {type: training, flops: 1e12}}
`
	}
	tests := []struct {
		name       string
		layout     string
		memA, memB string
		want       [][]string // the relayouts, kept layout excluded
	}{
		{"swap fits", "{profile: 3g.40gb}, {profile: 1g.10gb}", "6GiB", "6GiB", [][]string{{"1g.10gb", "3g.40gb"}}},
		{"a does not fit the small instance", "{profile: 3g.40gb}, {profile: 1g.10gb}", "20GiB", "6GiB", nil},
		{"equal profiles have no other order", "{profile: 3g.40gb}, {profile: 3g.40gb}", "6GiB", "6GiB", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := sim.ParseScenario("m.yaml", []byte(src(tc.layout, tc.memA, tc.memB)))
			if err != nil {
				t.Fatal(err)
			}
			o := &oracleSearch{sc: sc, phases: phaseBounds(sc, time.Minute)}
			p := &Plan{Phases: o.phases}
			var got [][]string
			for _, c := range o.layoutCandidates(p, 0, 0) {
				if c.Layout != nil {
					got = append(got, c.Layout)
				}
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
				t.Errorf("relayouts %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProfileMemory(t *testing.T) {
	for in, want := range map[string]uint64{"3g.40gb": 40e9, "1g.10gb": 10e9, "7g.141gb": 141e9, "7g": 0, "3g.40GiB": 0} {
		if got := profileMemory(in); got != want {
			t.Errorf("profileMemory(%q) = %d, want %d", in, got, want)
		}
	}
}

// The oracle's search caps one tenant at a time on a GPU with more than
// two MPS tenants, those without an SLO first.
func TestOracleStagesCapsBatchFirst(t *testing.T) {
	sc, err := sim.ParseScenario("s.yaml", []byte(`name: s
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, process: {pid: 11}, memory: 1GiB, slo: {quantile: 0.9, target: 1s}, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}
  - {name: b, process: {pid: 12}, memory: 1GiB, slo: {quantile: 0.9, target: 1s}, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}
  - {name: t, process: {pid: 13}, memory: 1GiB, workload: {type: training, flops: 1e12}}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := &oracleSearch{sc: sc, phases: phaseBounds(sc, time.Minute)}
	p := &Plan{Phases: o.phases}
	var order []uint32
	for stage := 0; ; stage++ {
		c := o.primaryCandidates(p, 0, stage)
		if c == nil {
			break
		}
		if stage == 0 {
			if len(c[0]) != 0 {
				t.Errorf("stage 0 tries %d cap settings on a three-tenant GPU, want none", len(c[0]))
			}
			continue
		}
		if len(c[0]) != len(capGridMany) {
			t.Fatalf("stage %d: %d candidates, want %d", stage, len(c[0]), len(capGridMany))
		}
		for pid, f := range c[0][len(c[0])-1].Caps {
			if f < 1 {
				order = append(order, pid)
			}
		}
	}
	if !slices.Equal(order, []uint32{13, 11, 12}) {
		t.Errorf("capped in the order %v, want the training job (13) first, then 11, 12", order)
	}
}

// TestPhaseRunsHeldWork: a tenant's work counts only in the minutes in
// which every SLO on its GPU held, judged as the run report judges them
// (requests that ended, completed or dropped, and those overdue at the
// minute's end, not those in flight within the target); a minute in which
// no SLO request ended nor was overdue holds; a minute split by a phase
// boundary is judged whole and its work goes to each phase's part.
func TestPhaseRunsHeldWork(t *testing.T) {
	w := func(good, completed, dropped, overdue int, train, other float64) *sim.WindowStats {
		return &sim.WindowStats{Tenants: []sim.TenantWindow{
			{Tenant: "chat", GPU: "a", SLOQuantile: 0.9, SLOTarget: time.Second, Good: good, Completed: completed, Dropped: dropped, Overdue: overdue, Work: 1},
			{Tenant: "train", GPU: "a", Work: train},
			{Tenant: "other", GPU: "b", Work: other},
		}}
	}
	frags := []fragment{
		{minute: 0, phase: 0, w: w(10, 10, 0, 1, 2, 5)}, // held: 10 of 10 ended and 1 overdue
		{minute: 1, phase: 0, w: w(8, 9, 1, 0, 3, 7)},   // a broken: 8 of 10 ended
		{minute: 2, phase: 0, w: w(0, 0, 0, 0, 4, 1)},   // nothing ended nor overdue: held
		// minute 3 split by the phase boundary: 9 of 10 over the minute
		// holds, though its first part alone (5 of 6) would not
		{minute: 3, phase: 0, w: w(5, 6, 0, 0, 1, 1)},
		{minute: 3, phase: 1, w: w(4, 4, 0, 0, 2, 2)},
		{minute: 4, phase: 1, w: w(0, 0, 0, 3, 5, 1)}, // a broken: nothing ended, 3 overdue
	}
	runs := phaseRuns(frags, 2)
	want := []map[string]float64{
		{"chat": 3, "train": 7, "other": 14},
		{"chat": 1, "train": 2, "other": 3},
	}
	for pi, r := range runs {
		if !maps.Equal(r.heldWork, want[pi]) {
			t.Errorf("phase %d: held work %v, want %v", pi, r.heldWork, want[pi])
		}
	}
	if c := runs[0].Tenants[0]; c.Tenant != "chat" || c.Good != 23 || c.Completed != 25 || c.Dropped != 1 {
		t.Errorf("phase 0's chat window %+v, want the sum of its fragments", c)
	}
}

// A replay's fragment keeps the window's counts and no latencies: the
// scores read none, and a fragment is kept for every minute of the run.
func TestFragmentKeepsNoLatencies(t *testing.T) {
	sc, err := sim.ParseScenario("fast.yaml", []byte(`name: fast
duration: 2m
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - name: fast
    gpu: 0
    slo: {quantile: 0.99, target: 5ms}
    workload: {type: dnn, flops: 1e8, bytes: 1e6, max_batch: 8, arrival: {process: poisson, rate: 2000}}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sc, sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for minute := range 2 {
		s.AdvanceTo(simrun.Start.Add(time.Duration(minute+1) * time.Minute))
		f := cutFragment(s, minute, 0)
		tw := f.w.Tenants[0]
		if f.minute != minute || tw.Completed < 100_000 || tw.Good == 0 {
			t.Fatalf("minute %d: fragment %+v lacks the window's counts", minute, tw)
		}
		if tw.Latencies != nil {
			t.Errorf("minute %d: the fragment keeps %d latencies", minute, len(tw.Latencies))
		}
	}
}

// TestITLJudgedByTokens: an inter-token latency SLO is judged over tokens,
// as the run report judges it: 800 good of 1,000 tokens misses p90
// however few requests completed, both in a goodput minute and over the
// phase (whose window keeps the metric and sums the tokens).
func TestITLJudgedByTokens(t *testing.T) {
	w := func(good, tokens int) *sim.WindowStats {
		return &sim.WindowStats{Tenants: []sim.TenantWindow{
			{Tenant: "chat", GPU: "a", SLOQuantile: 0.9, SLOTarget: 50 * time.Millisecond, SLOMetric: sim.SLOMetricITL,
				Good: good, Completed: 5, Tokens: tokens, Work: 1},
			{Tenant: "train", GPU: "a", Work: 2},
		}}
	}
	runs := phaseRuns([]fragment{
		{minute: 0, phase: 0, w: w(800, 1000)}, // broken: 80% of the tokens
		{minute: 1, phase: 0, w: w(990, 1000)}, // held
	}, 1)
	if want := map[string]float64{"chat": 1, "train": 2}; !maps.Equal(runs[0].heldWork, want) {
		t.Errorf("held work %v, want %v (only the second minute held)", runs[0].heldWork, want)
	}
	c := runs[0].Tenants[0]
	if c.SLOMetric != sim.SLOMetricITL || c.Tokens != 2000 || c.Good != 1790 {
		t.Fatalf("phase window %+v, want the ITL metric and the fragments' tokens", c)
	}
	if report.Held(c) {
		t.Errorf("1790 good of 2000 tokens met p90")
	}
	if s := scoreAll([]*phaseRun{runs[0]}, func(sim.TenantWindow) bool { return true }); s[0].attainment != 0.895 {
		t.Errorf("attainment %v, want 1790/2000", s[0].attainment)
	}
}

// TestOracleRelayoutJudgedOverTheRun: on mig-relayout the loads swap at
// 5 minutes and the oracle swaps the MIG profiles then. On seed 2 the
// relayout's drains and restarts cost both tenants their SLO inside the
// second phase (vision-b just under p95 there), while keeping the layout
// keeps vision-a's and loses vision-b's outright (its queue overflows);
// over the run, as the report judges an SLO, the relayout meets both. A
// search that ranked a phase's settings by the SLOs met inside the phase
// first kept the layout. The test checks both: the plan's layout, and the
// run of the oracle's policy (simrun, as the tables run it) with its
// report's verdict on each SLO.
func TestOracleRelayoutJudgedOverTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a search over 10 virtual minutes")
	}
	sc, cfg, err := simrun.LoadScenario("mig-relayout")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Find(context.Background(), sc, cfg, 2, sc.Duration, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Phases) != 2 {
		t.Fatalf("%d phases, want 2", len(p.Phases))
	}
	if got, want := p.Phases[1].GPUs[0].Layout, []string{"1g.10gb", "3g.40gb"}; !slices.Equal(got, want) {
		t.Errorf("layout %v in the second phase, want the relayout to %v", got, want)
	}
	res, err := simrun.Run(context.Background(), simrun.Config{Scenario: "mig-relayout", Policy: Name, Seed: 2, SeedSet: true, Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	met := map[string]bool{}
	for _, ts := range res.Recorder.Summary().Tenants {
		if ts.SLOMet != nil {
			met[ts.Tenant] = *ts.SLOMet
		}
	}
	if want := map[string]bool{"vision-a": true, "vision-b": true}; !maps.Equal(met, want) {
		t.Errorf("SLOs met over the run %v, want %v", met, want)
	}
}

// TestScoreRunMetFirst: the SLOs met over the run so far rank first, those
// met inside the phase break a tie.
func TestScoreRunMetFirst(t *testing.T) {
	tw := func(name string, good, completed int) sim.TenantWindow {
		return sim.TenantWindow{Tenant: name, GPU: "a", SLOQuantile: 0.95, SLOTarget: time.Second, Good: good, Completed: completed}
	}
	run := func(phase, sofar []sim.TenantWindow) *phaseRun {
		return &phaseRun{WindowStats: sim.WindowStats{Tenants: phase}, sofar: &sim.WindowStats{Tenants: sofar}}
	}
	tests := []struct {
		name string
		a, b *phaseRun // a ranks above b
	}{
		{"both met over the run beat one met inside the phase",
			run([]sim.TenantWindow{tw("x", 92, 100), tw("y", 94, 100)}, []sim.TenantWindow{tw("x", 192, 200), tw("y", 190, 200)}),
			run([]sim.TenantWindow{tw("x", 100, 100), tw("y", 0, 100)}, []sim.TenantWindow{tw("x", 200, 200), tw("y", 96, 200)})},
		{"a tie over the run: met inside the phase",
			run([]sim.TenantWindow{tw("x", 95, 100), tw("y", 0, 100)}, []sim.TenantWindow{tw("x", 195, 200), tw("y", 100, 200)}),
			run([]sim.TenantWindow{tw("x", 94, 100), tw("y", 50, 100)}, []sim.TenantWindow{tw("x", 194, 200), tw("y", 150, 200)})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := scoreAll([]*phaseRun{tc.a, tc.b}, func(sim.TenantWindow) bool { return true })
			if !s[0].better(s[1]) || s[1].better(s[0]) {
				t.Errorf("scores %+v, %+v: want the first above the second", s[0], s[1])
			}
		})
	}
}

// TestScoreUnservedSLONotMet: the run report counts a latency tenant with
// an SLO that never served (no request ended nor was overdue) as an SLO
// missed; the oracle judges it so too over the run (the run so far, or
// the whole run where the window is the run), so that a plan under which
// chat never served does not outrank, on the SLOs met over the run, one
// under which it served and missed. Inside a phase its SLO is judged as
// a goodput minute is: a phase with no request to judge holds.
func TestScoreUnservedSLONotMet(t *testing.T) {
	chat := func(completed, good int) sim.TenantWindow {
		return sim.TenantWindow{Tenant: "chat", GPU: "g0", SLOTarget: time.Second, SLOQuantile: 0.99, Completed: completed, Good: good}
	}
	train := sim.TenantWindow{Tenant: "train", GPU: "g0"}
	run := func(phase, sofar sim.TenantWindow, trainWork, trainHeld float64) *phaseRun {
		w := &phaseRun{WindowStats: sim.WindowStats{Tenants: []sim.TenantWindow{phase, train}},
			work: map[string]float64{"train": trainWork}, heldWork: map[string]float64{"train": trainHeld}}
		if sofar.Tenant != "" {
			w.sofar = &sim.WindowStats{Tenants: []sim.TenantWindow{sofar, train}}
		}
		return w
	}
	none := sim.TenantWindow{}
	for _, tc := range []struct {
		name                string
		a, missed           *phaseRun // a: chat never served (or quiet in the phase)
		wantRunMet, wantMet int
	}{
		{"never served over the whole run",
			run(chat(0, 0), none, 100, 100), run(chat(1000, 900), none, 50, 0), 0, 0},
		{"never served in the run so far",
			run(chat(0, 0), chat(0, 0), 100, 100), run(chat(1000, 900), chat(1000, 900), 50, 0), 0, 1},
		{"served, quiet in the phase",
			run(chat(0, 0), chat(1000, 995), 100, 100), run(chat(1000, 900), chat(2000, 1895), 50, 0), 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := scoreAll([]*phaseRun{tc.a, tc.missed}, func(sim.TenantWindow) bool { return true })
			t.Logf("chat never served (or quiet): %+v; served and missed: %+v", sc[0], sc[1])
			if sc[0].runMet != tc.wantRunMet || sc[0].met != tc.wantMet {
				t.Errorf("SLOs met over the run %d, inside the phase %d; want %d, %d", sc[0].runMet, sc[0].met, tc.wantRunMet, tc.wantMet)
			}
			if tc.wantRunMet == 0 && sc[0].runMet > sc[1].runMet {
				t.Errorf("the plan under which chat never served ranks above the one that served it, on the SLOs met over the run")
			}
		})
	}
}

// TestPhaseRunsWorkLessRedo: a phase's work and held work are the run
// report's (report.Unredone): a training job's steps that a restart threw
// away and that it has not redone by the phase's end are not work, taken
// from its last minutes back, as good as each minute's work was; the steps
// it redoes in the next phase are that phase's; the phases sum to the run.
func TestPhaseRunsWorkLessRedo(t *testing.T) {
	w := func(good int, train float64, redo int) *sim.WindowStats {
		return &sim.WindowStats{Tenants: []sim.TenantWindow{
			{Tenant: "chat", GPU: "a", SLOQuantile: 0.9, SLOTarget: time.Second, Good: good, Completed: 10, Work: 1},
			{Tenant: "train", GPU: "a", Work: train, Redo: redo},
		}}
	}
	tests := []struct {
		name       string
		frags      []fragment
		work, held []float64 // train's, by phase
	}{
		{"steps to redo at the end are no work",
			[]fragment{{0, 0, w(10, 100, 30)}}, []float64{70}, []float64{70}},
		{"redone in the next phase: that phase's",
			[]fragment{{0, 0, w(10, 100, 30)}, {1, 1, w(10, 50, 0)}}, []float64{70, 80}, []float64{70, 80}},
		{"not redone in the next phase either",
			[]fragment{{0, 0, w(10, 100, 30)}, {1, 1, w(10, 0, 20)}}, []float64{70, 10}, []float64{70, 10}},
		{"a restart in the phase takes steps of the one before",
			[]fragment{{0, 0, w(10, 100, 0)}, {1, 1, w(10, 0, 40)}}, []float64{100, -40}, []float64{100, -40}},
		// minute 0 broken (5 of 10 good), minute 1 held: of the 50 steps
		// to redo, 40 are minute 1's (all good), 10 minute 0's (none)
		{"taken from the last minutes back, good as each minute was",
			[]fragment{{0, 0, w(5, 100, 0)}, {1, 0, w(10, 40, 50)}}, []float64{90}, []float64{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := phaseRuns(tc.frags, len(tc.work))
			for pi, r := range runs {
				if r.work["train"] != tc.work[pi] || r.heldWork["train"] != tc.held[pi] {
					t.Errorf("phase %d: train's work %v, held %v; want %v, %v", pi, r.work["train"], r.heldWork["train"], tc.work[pi], tc.held[pi])
				}
			}
			all := mergedRun(runs)
			var work float64
			for _, f := range tc.frags {
				work += f.w.Tenants[1].Work
			}
			if want := work - float64(tc.frags[len(tc.frags)-1].w.Tenants[1].Redo); all.work["train"] != want {
				t.Errorf("the run's work %v, want %v (its steps less those to redo at the end)", all.work["train"], want)
			}
		})
	}
}

// TestScoreWorkLessRedo: candidates rank by the work the run report
// counts, not by the steps a restart threw away.
func TestScoreWorkLessRedo(t *testing.T) {
	run := func(before float64, train float64, redo int) *phaseRun {
		w := func(train float64, redo int) *sim.WindowStats {
			return &sim.WindowStats{Tenants: []sim.TenantWindow{{Tenant: "train", GPU: "a", Work: train, Redo: redo}}}
		}
		return phaseRuns([]fragment{{0, 0, w(before, 0)}, {1, 1, w(train, redo)}}, 2)[1]
	}
	tests := []struct {
		name string
		a, b *phaseRun // a ranks above b
	}{
		// 100 steps counted against 80 ranked the second first
		{"80 steps kept above 100 of which 60 are to redo", run(1000, 80, 0), run(1000, 100, 60)},
		// the phase spent redoing a restart's steps: both counted none
		{"less left to redo at the phase's end", run(3000, 0, 622), run(3000, 0, 1364)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := scoreAll([]*phaseRun{tc.a, tc.b}, func(sim.TenantWindow) bool { return true })
			if !s[0].better(s[1]) || s[1].better(s[0]) {
				t.Errorf("scores %+v, %+v: want the first above the second", s[0], s[1])
			}
		})
	}
}
