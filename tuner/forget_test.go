package tuner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// capEvery asks for an MPS cap on every MPS client of every GPU, each
// round.
type capEvery struct{}

func (capEvery) Name() string { return "cap-every" }
func (capEvery) Decide(s *State) []Action {
	var out []Action
	for _, d := range s.UpDevices() {
		for _, p := range d.Processes {
			out = append(out, Action{Target: Target{GPU: d.UUID, Knob: gpu.KnobMPSActiveThreads, PID: p.PID}, Tenant: "t",
				Current: Fraction(1), Want: Fraction(0.5), Restart: true, Reason: "test"})
		}
	}
	return out
}

// A host whose MPS clients come and go (each round four new PIDs, as a
// client restarted for a new cap comes back under a new one) keeps what
// the tuner holds of them bounded: targets, changes, pending fractions,
// originals (in memory and open in the journal), the status's settings,
// each history point, and the guards' per-target state. Without
// forgetGone every one of them grew with every PID ever capped (2,000
// rounds: 8,000 settings and history values a point, 1,000 originals, a
// round 4.5 ms at 500 rounds and 30 ms at 2,000). So too where NVML
// refuses the GPU's compute list and answers the MPS clients' (which
// would hold a capped client).
func TestProcessKnobsForgotten(t *testing.T) {
	for _, tc := range []struct {
		name          string
		err           error
		computeUnread bool
	}{{"applied", nil, false}, {"failing", errors.New("boom"), false}, {"compute list refused", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			j := openJournal(t, filepath.Join(t.TempDir(), "j"))
			defer j.Close()
			clk := gpu.NewManualClock(t0)
			back := &Backoff{Base: time.Second, Max: time.Hour}
			hold := &RevertHold{Hold: time.Hour}
			retry := &Retry{After: time.Hour}
			rec := &recorder{}
			if tc.err != nil {
				rec.Errs = map[string]error{"SetMPSActiveThreads": tc.err}
			}
			tu, err := New(Options{Policy: capEvery{}, Guards: []Guard{back, hold, retry}, Actuators: ActuatorsOf(rec), Journal: j, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			pid := uint32(100)
			const perRound, rounds = 4, 400
			for range rounds {
				clk.Advance(15 * time.Second)
				var procs []gpu.Process
				for range perRound {
					procs = append(procs, mpsProc(pid, nil))
					hold.Block(Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: pid}, Fraction(0.2), clk.Now())
					pid++
				}
				d := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs, ProcessesUnread: tc.computeUnread}
				if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), []gpu.Device{d}, nil)); err != nil {
					t.Fatal(err)
				}
			}
			// a process is kept for GoneAfter (four rounds of 15 s) after
			// its last round, plus the round it is in
			bound := perRound * (int(GoneAfter/(15*time.Second)) + 1)
			s := tu.Status()
			last := s.History[len(s.History)-1]
			atMost(t, bound+1, fmt.Sprintf("after %d rounds of %d new clients", rounds, perRound), []kept{
				{"targets", len(tu.targets)}, {"changes", len(tu.changes)}, {"pending", len(tu.pending)},
				{"originals", len(tu.originals)}, {"journal originals", len(j.Originals())}, {"tracked processes", len(tu.procs)},
				{"refusals logged", len(tu.refused)}, {"status settings", len(s.Settings)}, {"history values", len(last.Values)},
				{"unrestored", s.Unrestored}, {"backoff", len(back.state)}, {"revert hold", len(hold.bad)}, {"retry", len(retry.asked)},
			})
		})
	}
}

// kept is how many of something the tuner keeps.
type kept struct {
	what string
	n    int
}

// atMost fails t for each of ks over bound.
func atMost(t *testing.T, bound int, after string, ks []kept) {
	t.Helper()
	for _, k := range ks {
		if k.n > bound {
			t.Errorf("%s: %d %s, want at most %d", k.what, k.n, after, bound)
		}
	}
}

// A client missing from fewer than GoneAfter of readings, or from a GPU
// the readings did not read or whose MPS clients' list NVML refused
// (MPSProcessesUnread: the compute list alone read), keeps its original
// and setting; once gone
// for GoneAfter its original is closed in the journal as a restore would
// (process gone, nothing to restore). A pause, which names its tenant by
// a PID that may be gone, is never forgotten so.
func TestProcessKnobsKeptWhileBrieflyMissing(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "j"))
	defer j.Close()
	tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, []Action{mpsAction(7, 1, 0.4)}, j)
	k := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}.String()
	if _, err := tu.RunOnce(context.Background(), emptySnap(clk.Now())); err != nil {
		t.Fatal(err)
	}
	if _, ok := tu.originals[k]; !ok {
		t.Fatalf("no original of %s after its change", k)
	}
	tu.o.Policy = fixed(nil)
	without := func(up bool) {
		clk.Advance(15 * time.Second)
		snap := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: up, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(8, nil)}}}, nil)
		if _, err := tu.RunOnce(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	unlisted := func() {
		clk.Advance(15 * time.Second)
		snap := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, MPSProcessesUnread: true}}, nil)
		if _, err := tu.RunOnce(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	// three rounds missing, then a GPU not read: kept
	for range 3 {
		without(true)
	}
	for range 10 {
		without(false)
	}
	for range 10 {
		unlisted()
	}
	if _, ok := tu.originals[k]; !ok {
		t.Fatalf("original of %s dropped while missing for less than %v", k, GoneAfter)
	}
	if _, ok := tu.targets[k]; !ok {
		t.Fatalf("setting of %s dropped while missing for less than %v", k, GoneAfter)
	}
	without(true) // the fourth round missing: a minute
	if _, ok := tu.originals[k]; ok {
		t.Errorf("original of %s kept after its process was gone for %v", k, GoneAfter)
	}
	if _, ok := tu.targets[k]; ok {
		t.Errorf("setting of %s kept after its process was gone for %v", k, GoneAfter)
	}
	for _, o := range j.Originals() {
		if o.Target.String() == k {
			t.Errorf("journal still holds the original of %s", k)
		}
	}
	pause := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 9}
	if tu.trackProc(pause, clk.Now()); tu.procs[pause.String()] != (procSeen{}) {
		t.Errorf("pause target %s tracked to be forgotten with its PID", pause)
	}
}

// Retry forgets what it was asked for a target that is gone, and only that.
func TestRetryForget(t *testing.T) {
	r := &Retry{After: time.Hour}
	a, b := mpsAction(7, 1, 0.5), mpsAction(8, 1, 0.5)
	r.Record(a, OutcomeApplied, nil, t0)
	r.Record(b, OutcomeApplied, nil, t0)
	r.Forget(map[string]bool{a.Target.String(): true})
	if ok, _ := r.Admit(nil, a, t0); !ok {
		t.Errorf("%s still refused after Forget", a.Target)
	}
	if ok, _ := r.Admit(nil, b, t0); ok {
		t.Errorf("%s admitted: Forget dropped a target it was not given", b.Target)
	}
}

// Retry keeps only what still refuses something: the values a target was
// asked for that are older than After are dropped at the next record
// (a policy asking a new value each round grew it by one a round), while
// one refused as not supported is kept.
func TestRetryDropsExpired(t *testing.T) {
	r := &Retry{After: time.Minute}
	never := mpsAction(9, 1, 0.5)
	r.Record(never, OutcomeFailed, gpu.ErrNotSupported, t0)
	for i := range 100 {
		r.Record(mpsAction(7, 1, Fraction(0.01*float64(i+1))), OutcomeApplied, nil, t0.Add(time.Duration(i)*15*time.Second))
	}
	if n := len(r.asked); n > 6 {
		t.Errorf("%d values remembered after 100 rounds, want the last minute's and the unsupported one (at most 6)", n)
	}
	if ok, _ := r.Admit(nil, never, t0.Add(time.Hour)); ok {
		t.Error("an action refused as not supported admitted again")
	}
	last := mpsAction(7, 1, 1)
	if ok, _ := r.Admit(nil, last, t0.Add(99*15*time.Second)); ok {
		t.Error("the last value asked for admitted again at once")
	}
}

// The fast tracker forgets a tenant the snapshots have not shown for ten
// windows (a reload removed it, its namespace went away), and keeps one
// missing for less.
func TestFastTrackerForgetsGoneTenants(t *testing.T) {
	f := newFastTracker(time.Minute)
	at := func(d time.Duration, names ...string) {
		snap := &tenant.Snapshot{}
		for _, n := range names {
			snap.SLOs = append(snap.SLOs, tenant.SLOStatus{Tenant: n, Status: latency.Status{Quantile: 0.9, GoodKnown: true, RequestsTotal: 10, GoodRequestsTotal: 9}})
		}
		f.observe(t0.Add(d), snap)
	}
	for i := range 200 {
		at(time.Duration(i)*15*time.Second, "kept", fmt.Sprintf("ns-%d", i))
	}
	at(50*time.Minute+15*time.Second, "kept") // ns-199 last seen 15 s before
	if _, ok := f.points["ns-199"]; !ok {
		t.Error("a tenant missing for one round forgotten")
	}
	if n := len(f.points); n > 2+int(10*time.Minute/(15*time.Second)) {
		t.Errorf("%d tenants' counters kept, most of them unseen for far longer than ten windows", n)
	}
}

// TestProcessPresentUnlisted: the latest snapshot tells whether a
// target's process runs only where it read the list that would hold it:
// a GPU down, not listed, or whose list NVML refused tells nothing, and a
// restore there does not take the process for gone (which would close its
// original, nothing set back). An MPS client's is the MPS clients' list,
// read where the compute list was refused; a placed process's on a MIG
// GPU, every MIG device's; on an MPS GPU, the compute list and the MPS
// clients' (its process may be in either).
func TestProcessPresentUnlisted(t *testing.T) {
	capped := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}
	placed := Target{GPU: uuid0, Knob: gpu.KnobPlacement, PID: 7}
	mig := func(unread bool) *gpu.Device {
		return &gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, ProcessesUnread: unread,
			MIG:       []gpu.MIGInstance{{GPUInstanceID: 1}, {GPUInstanceID: 2, ProcessesUnread: unread}},
			Processes: []gpu.Process{{PID: 8, Type: gpu.ProcessCompute, GPUInstanceID: 1, ComputeInstanceID: 0}}}
	}
	for _, tc := range []struct {
		name           string
		tg             Target
		dev            *gpu.Device
		present, known bool
	}{
		{"listed", capped, &gpu.Device{UUID: uuid0, Up: true, Processes: []gpu.Process{mpsProc(7, nil)}}, true, true},
		{"gone", capped, &gpu.Device{UUID: uuid0, Up: true, Processes: []gpu.Process{mpsProc(8, nil)}}, false, true},
		{"GPU down", capped, &gpu.Device{UUID: uuid0}, true, false},
		{"GPU not listed", capped, nil, true, false},
		{"MPS clients' list refused", capped, &gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, MPSProcessesUnread: true}, true, false},
		{"compute list refused, gone", capped, &gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, ProcessesUnread: true,
			Processes: []gpu.Process{mpsProc(8, nil)}}, false, true},
		{"compute list refused, listed", capped, &gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, ProcessesUnread: true,
			Processes: []gpu.Process{mpsProc(7, nil)}}, true, true},
		{"placed, MIG lists read", placed, mig(false), false, true},
		{"placed, a MIG device's list refused", placed, mig(true), true, false},
		{"placed, compute list refused on an MPS GPU", placed, &gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, ProcessesUnread: true,
			Processes: []gpu.Process{mpsProc(8, nil)}}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, nil, nil)
			var devs []gpu.Device
			if tc.dev != nil {
				devs = append(devs, *tc.dev)
			}
			tu.last = snapshot(clk.Now(), devs, nil)
			if present, known := tu.processPresent(tc.tg); present != tc.present || known != tc.known {
				t.Errorf("present %v, known %v; want %v, %v", present, known, tc.present, tc.known)
			}
		})
	}
}

// On a MIG GPU whose lists NVML answers for some MIG devices and refuses
// for others, a placed process missing for GoneAfter is forgotten where
// the list of the MIG device it was listed in was read (or every list of
// its GPU instance), and kept where it was not. A MIG device not asked
// (its handle refused, its GPU instance not given) marks every instance
// unread, its own not known: a process listed in a device read was kept
// for good (one more target per move, on a GPU whose handle NVML refuses
// for good), and one in a GPU instance none of whose devices was asked
// (not listed at all) was forgotten while it ran, its status and guard
// state lost. Where the compute instances are not given, a process's
// device is not known: it is kept while its instance is read in part.
func TestPlacedProcessForgottenOnMIGReadInPart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ci           int               // the compute instance the processes were listed in
		mig          []gpu.MIGInstance // while read in part
		kept1, kept2 bool              // the processes last listed in GPU instances 1 and 2
	}{
		{"GPU instance 2's list refused", 0, []gpu.MIGInstance{
			{GPUInstanceID: 1, ComputeInstancesRead: []int{0}}, {GPUInstanceID: 2, ProcessesUnread: true}}, false, true},
		{"GPU instance 2's list refused, compute instances not given", -1, []gpu.MIGInstance{
			{GPUInstanceID: 1}, {GPUInstanceID: 2, ProcessesUnread: true}}, false, true},
		{"a MIG device's handle refused, the others read", 0, []gpu.MIGInstance{
			{GPUInstanceID: 1, ProcessesUnread: true, ComputeInstancesRead: []int{0}},
			{GPUInstanceID: 2, ProcessesUnread: true, ComputeInstancesRead: []int{0}}}, false, false},
		{"GPU instance 2's MIG device's handle refused", 0, []gpu.MIGInstance{
			{GPUInstanceID: 1, ProcessesUnread: true, ComputeInstancesRead: []int{0}}}, false, true},
		{"GPU instance 2's other compute instance's handle refused", 1, []gpu.MIGInstance{
			{GPUInstanceID: 1, ProcessesUnread: true, ComputeInstancesRead: []int{1}},
			{GPUInstanceID: 2, ProcessesUnread: true, ComputeInstancesRead: []int{0}}}, false, true},
		{"a MIG device's handle refused, compute instances not given", -1, []gpu.MIGInstance{
			{GPUInstanceID: 1, ProcessesUnread: true}, {GPUInstanceID: 2, ProcessesUnread: true}}, true, true},
		{"a MIG device's GPU instance not given", 0, []gpu.MIGInstance{
			{GPUInstanceID: 1, ProcessesUnread: true, ComputeInstancesRead: []int{0}},
			{GPUInstanceID: 2, ProcessesUnread: true, ComputeInstancesRead: []int{0}},
			{GPUInstanceID: -1, ProcessesUnread: true}}, false, false},
		{"none marked", 0, []gpu.MIGInstance{{GPUInstanceID: 1}, {GPUInstanceID: 2}}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, nil, nil)
			in1 := Target{GPU: uuid0, Knob: gpu.KnobPlacement, PID: 5}
			in2 := Target{GPU: uuid0, Knob: gpu.KnobPlacement, PID: 6}
			tu.trackProc(in1, clk.Now())
			tu.trackProc(in2, clk.Now())
			// listed once each while every list was read, then missing
			// for GoneAfter while they are read in part
			d := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
				MIG: []gpu.MIGInstance{{GPUInstanceID: 1}, {GPUInstanceID: 2}},
				Processes: []gpu.Process{{PID: 5, Type: gpu.ProcessCompute, GPUInstanceID: 1, ComputeInstanceID: tc.ci},
					{PID: 6, Type: gpu.ProcessCompute, GPUInstanceID: 2, ComputeInstanceID: tc.ci}}}
			tu.forgetGone(snapshot(clk.Now(), []gpu.Device{d}, nil), clk.Now())
			for range 5 {
				clk.Advance(15 * time.Second)
				d := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, ProcessesUnread: true, MIG: tc.mig}
				tu.forgetGone(snapshot(clk.Now(), []gpu.Device{d}, nil), clk.Now())
			}
			for _, c := range []struct {
				tg   Target
				kept bool
			}{{in1, tc.kept1}, {in2, tc.kept2}} {
				if _, ok := tu.procs[c.tg.String()]; ok != c.kept {
					t.Errorf("%s (listed in GPU instance %d) kept %v after %v missing, want %v", c.tg, c.tg.PID-4, ok, 5*15*time.Second, c.kept)
				}
			}
		})
	}
}

// A process moved (or exited) in the round it was acted on is never
// listed again: what it was listed in is taken from the snapshot acted on.
// On a MIG GPU whose GPU instance 2's list NVML refuses for good, each
// placement of a process listed in GPU instance 1 (read) was kept for
// good (its instance unknown, the GPU's lists never all read): one more
// target per move; so too where NVML refuses a MIG device's handle for
// good (every instance marked unread, though GPU instance 1's device was
// read).
func TestPlacementsOfProcessesGoneBeforeListedAgainForgotten(t *testing.T) {
	for _, tc := range []struct {
		name string
		mig  []gpu.MIGInstance
	}{
		{"GPU instance 2's list refused", []gpu.MIGInstance{{GPUInstanceID: 1, ComputeInstancesRead: []int{0}}, {GPUInstanceID: 2, ProcessesUnread: true}}},
		{"a MIG device's handle refused", []gpu.MIGInstance{{GPUInstanceID: 1, ProcessesUnread: true, ComputeInstancesRead: []int{0}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, nil, nil)
			const rounds = 100
			for i := range rounds {
				clk.Advance(15 * time.Second)
				pid := uint32(1000 + i)
				d := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true, ProcessesUnread: true, MIG: tc.mig,
					Processes: []gpu.Process{{PID: pid, Type: gpu.ProcessCompute, GPUInstanceID: 1, ComputeInstanceID: 0}}}
				// as RunOnce: the snapshot kept, what is gone forgotten,
				// then the move decided on it made
				snap := snapshot(clk.Now(), []gpu.Device{d}, nil)
				tu.last = snap
				tu.forgetGone(snap, clk.Now())
				tu.trackProc(Target{GPU: uuid0, Knob: gpu.KnobPlacement, PID: pid}, clk.Now())
			}
			if n, most := len(tu.procs), int(GoneAfter/(15*time.Second))+2; n > most {
				t.Errorf("%d process targets kept after %d rounds of one move each, want at most %d", n, rounds, most)
			}
		})
	}
}

// On a GPU read as MPS (another tenant's MPS client listed) whose compute
// list NVML refuses and whose MPS clients' list it answers, a plain
// compute process is in the refused list: its placement and its tenant's
// ended pause are kept (the MPS clients' list was taken for every
// tenant's, and both were forgotten while it ran). A tenant last listed
// as MPS clients only is told by the MPS clients' list
// (TestEndedPausesOfGoneTenantsForgotten).
func TestTargetsKeptWhileTheirListRefused(t *testing.T) {
	// tenant a's MPS client 10 listed; tenant b's compute process 20 runs
	// unlisted
	dev := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, ProcessesUnread: true, Processes: []gpu.Process{mpsProc(10, nil)}}
	usage := []tenant.Usage{{Tenant: "a", UUID: uuid0, PIDs: []uint32{10}}}
	for _, tc := range []struct {
		name  string
		knob  gpu.Knob
		track func(tu *Tuner, tg Target, now time.Time)
		kept  func(tu *Tuner, tg Target) bool
	}{
		{"placement", gpu.KnobPlacement,
			func(tu *Tuner, tg Target, now time.Time) { tu.trackProc(tg, now) },
			func(tu *Tuner, tg Target) bool { _, ok := tu.procs[tg.String()]; return ok }},
		{"ended pause", gpu.KnobPauseDuty,
			func(tu *Tuner, tg Target, now time.Time) {
				tu.targets[tg.String()] = Setting{GPU: uuid0, Tenant: "b", Knob: gpu.KnobPauseDuty, PID: tg.PID, Mode: ModeEnforce, Target: Duty(0), At: now}
			},
			func(tu *Tuner, tg Target) bool { _, ok := tu.targets[tg.String()]; return ok }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, nil, nil)
			tg := Target{GPU: uuid0, Knob: tc.knob, PID: 20}
			tc.track(tu, tg, clk.Now())
			for range 6 {
				clk.Advance(15 * time.Second)
				snap := snapshot(clk.Now(), []gpu.Device{dev}, usage)
				tu.forgetGone(snap, clk.Now())
				tu.forgetEndedPauses(snap, clk.Now())
			}
			if !tc.kept(tu, tg) {
				t.Errorf("%s forgotten after %v though the list that would hold its process (the compute list) was refused every round", tg, 6*15*time.Second)
			}
		})
	}
}

// An ended pause whose tenant was listed as an MPS client only is told
// gone by the MPS clients' list alone only while the GPU reads in MPS
// mode: with the GPU since switched to time-slicing (its empty MPS list
// says nothing of a compute process), the pause was forgotten while the
// tenant's compute process ran unlisted.
func TestEndedPauseKeptWhileItsComputeProcessRunsUnlisted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		firstUnread bool // the compute list refused while b was listed as an MPS client
		after       gpu.SharingMode
	}{
		{"noted from a listing read in part, the GPU switched to time-slicing", true, gpu.SharingTimeSlice},
		{"noted from every list, the GPU switched to time-slicing", false, gpu.SharingTimeSlice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, nil, nil)
			tg := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 20}
			tu.targets[tg.String()] = Setting{GPU: uuid0, Tenant: "b", Knob: gpu.KnobPauseDuty, PID: 20, Mode: ModeEnforce, Target: Duty(0), At: clk.Now()}
			for range 2 {
				clk.Advance(15 * time.Second)
				dev := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, ProcessesUnread: tc.firstUnread, Processes: []gpu.Process{mpsProc(10, nil)}}
				snap := snapshot(clk.Now(), []gpu.Device{dev}, []tenant.Usage{{Tenant: "b", UUID: uuid0, PIDs: []uint32{10}}})
				tu.forgetGone(snap, clk.Now())
				tu.forgetEndedPauses(snap, clk.Now())
			}
			// b's MPS client gone; its compute process runs, on the
			// compute list NVML refuses
			for range 6 {
				clk.Advance(15 * time.Second)
				snap := snapshot(clk.Now(), []gpu.Device{{UUID: uuid0, Up: true, Mode: tc.after, ProcessesUnread: true}}, nil)
				tu.forgetGone(snap, clk.Now())
				tu.forgetEndedPauses(snap, clk.Now())
			}
			if _, ok := tu.targets[tg.String()]; !ok {
				t.Errorf("tenant b's ended pause forgotten, though the compute list (which would show its running process) was refused every round since its MPS client left")
			}
		})
	}
}
