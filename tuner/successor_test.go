package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// proc is an MPS client of a tenant on GPU-0.
type proc struct {
	pid    uint32
	tenant string
}

// tenantSnap is a snapshot at at of GPU-0 running procs, attributed to
// their tenants.
func tenantSnap(at time.Time, procs ...proc) *tenant.Snapshot {
	var ps []gpu.Process
	var usage []tenant.Usage
	for _, p := range procs {
		ps = append(ps, mpsProc(p.pid, nil))
		i := slices.IndexFunc(usage, func(u tenant.Usage) bool { return u.Tenant == p.tenant })
		if i < 0 {
			usage = append(usage, tenant.Usage{Tenant: p.tenant, UUID: uuid0})
			i = len(usage) - 1
		}
		usage[i].PIDs = append(usage[i].PIDs, p.pid)
	}
	return snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: ps}}, usage)
}

// unnamedRun is a tuner that caps the embed client PID 7 to 50% through
// a client restart whose hook names no successor (as systemctl, kubectl
// or docker restart name none), with its journal and log.
type unnamedRun struct {
	tu   *Tuner
	host *successorHost
	clk  *gpu.ManualClock
	j    *Journal
	path string
	log  *strings.Builder
}

func newUnnamedRun(t *testing.T, path string) *unnamedRun {
	t.Helper()
	host := &successorHost{}
	return newUnnamedRunOn(t, path, host, host)
}

// newUnnamedRunOn is an unnamedRun with its journal at path, over the MPS
// actuator mps, whose restarts host records.
func newUnnamedRunOn(t *testing.T, path string, host *successorHost, mps any) *unnamedRun {
	t.Helper()
	j := openJournal(t, path)
	t.Cleanup(func() { j.Close() })
	r := &unnamedRun{host: host, clk: gpu.NewManualClock(t0), j: j, path: path, log: &strings.Builder{}}
	var err error
	r.tu, err = New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(mps), Journal: j, Clock: r.clk, Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(r.log))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// embed and batch are a process of the tenant embed, of the tenant batch.
func embed(pid uint32) proc { return proc{pid, "embed"} }
func batch(pid uint32) proc { return proc{pid, "batch"} }

// restart runs the round that caps PID 7 on the snapshot of before.
func (r *unnamedRun) restart(t *testing.T, before ...proc) {
	t.Helper()
	r.tu.o.Policy = fixed{mpsAction(7, 1, 0.5)}
	if _, err := r.tu.RunOnce(context.Background(), tenantSnap(r.clk.Now(), before...)); err != nil {
		t.Fatal(err)
	}
	r.tu.o.Policy = fixed(nil)
	r.host.Calls = nil
}

// round runs a round 15 s on, on the snapshot of procs.
func (r *unnamedRun) round(t *testing.T, procs ...proc) []Decision {
	t.Helper()
	r.clk.Advance(15 * time.Second)
	d, err := r.tu.RunOnce(context.Background(), tenantSnap(r.clk.Now(), procs...))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// exit checks that the journal holds 100% on PID open alone (0: nothing),
// and that the restore at exit makes calls.
func (r *unnamedRun) exit(t *testing.T, open uint32, calls []string) {
	t.Helper()
	o := r.j.Originals()
	if open == 0 && len(o) != 0 || open != 0 && (len(o) != 1 || o[0].Target.PID != open || o[0].Value != Fraction(1)) {
		t.Errorf("journaled originals %+v, want 100%% on PID %d (0: none)", o, open)
	}
	if _, err := r.tu.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.host.Calls, calls) {
		t.Errorf("restore at exit: calls %q, want %q", r.host.Calls, calls)
	}
}

// unnamedLog is what the tuner logs when it cannot tell the successor.
const unnamedLog = "cannot tell the successor of an MPS client"

var restoredOn9 = []string{"SetMPSActiveThreads(GPU-0,9,1.0000)", "RestartClient(GPU-0,9)"}

// A client restarted through a hook that names no successor: the one new
// process of its tenant on the GPU within the bound is its successor,
// told once the bound has passed (until then the original stays with the
// old PID), which holds its original (in the journal too) and is set back
// at exit. None within the bound, several (a new replica before the
// successor, or one that came and went again), a new process of another
// tenant only, or a new one where another of the tenant's went too (a
// multi-process job restarted as a whole, or a process seen within the
// minute before the restart and never again: gone with it, as far as the
// tuner can tell) is not taken: the original is closed once the old PID is
// gone, as before, and the tuner says so once, naming the candidates.
// What was there at the restart is what the rounds saw within the minute
// before, not the restart round's sample alone: a process that sample
// missed is not taken for the successor. (Before, the original was
// closed as gone whatever came, and nothing was logged; then the first
// lone new process was taken at once, a worker the restart's sample had
// missed or a replica that came before the successor, and restarted at
// exit with the client's original cap.)
func TestUnnamedSuccessor(t *testing.T) {
	embed := func(pid uint32) proc { return proc{pid, "embed"} }
	batch := func(pid uint32) proc { return proc{pid, "batch"} }
	six := func(ps ...proc) [][]proc { return slices.Repeat([][]proc{ps}, 6) }
	then := func(first []proc, rest [][]proc) [][]proc { return append([][]proc{first}, rest[1:]...) }
	for _, c := range []struct {
		name   string
		seen   []proc // a round 15 s before the restart, nil for none
		before []proc
		rounds [][]proc // every 15 s after the restart
		open   uint32   // the PID holding the original after the rounds, 0 for none
		calls  []string // at exit
		logged string   // the candidates logged, "" for no line
	}{
		{"one candidate", nil, []proc{embed(7), batch(8)}, six(batch(8), embed(9)), 9, restoredOn9, ""},
		{"one candidate, the tenant's other process stays", nil, []proc{embed(7), embed(12), batch(8)}, six(batch(8), embed(12), embed(9)), 9, restoredOn9, ""},
		{"the old PID gone before its successor came", nil, []proc{embed(7), batch(8)},
			append([][]proc{{batch(8)}, {batch(8)}, {batch(8)}}, six(batch(8), embed(9))[:3]...), 9, restoredOn9, ""},
		{"a process of the tenant the restart's sample missed", []proc{embed(7), embed(12), batch(8)}, []proc{embed(7), batch(8)},
			then([]proc{batch(8), embed(12)}, six(batch(8), embed(12), embed(9))), 9, restoredOn9, ""},
		{"one candidate, another after the bound", nil, []proc{embed(7), batch(8)},
			append(six(batch(8), embed(9))[:4], []proc{batch(8), embed(9), embed(10)}, []proc{batch(8), embed(9), embed(10)}), 9, restoredOn9, ""},
		{"none within the bound", nil, []proc{embed(7), batch(8)},
			append(slices.Repeat([][]proc{{batch(8)}}, 5), []proc{batch(8), embed(9)}), 0, nil, "no pid"},
		{"two candidates", nil, []proc{embed(7), batch(8)}, six(batch(8), embed(9), embed(10)), 0, nil, "pid 9, 10"},
		{"a new replica before the successor", nil, []proc{embed(7), batch(8)},
			then([]proc{batch(8), embed(20)}, six(batch(8), embed(20), embed(9))), 0, nil, "pid 9, 20"},
		{"a new process that came and went before the successor", nil, []proc{embed(7), batch(8)},
			then([]proc{batch(8), embed(20)}, six(batch(8), embed(9))), 0, nil, "pid 9, 20"},
		{"another tenant's new process", nil, []proc{embed(7), batch(8)}, six(batch(8), batch(11)), 0, nil, "no pid"},
		{"a multi-process job restarted as a whole", nil, []proc{embed(7), embed(12), batch(8)}, six(batch(8), embed(9)), 0, nil, "pid 9"},
		{"a process of the tenant seen before the restart, not since", []proc{embed(7), embed(12), batch(8)}, []proc{embed(7), batch(8)},
			six(batch(8), embed(9)), 0, nil, "pid 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUnnamedRun(t, filepath.Join(t.TempDir(), "journal"))
			if c.seen != nil {
				r.round(t, c.seen...)
				r.clk.Advance(15 * time.Second)
			}
			r.restart(t, c.before...)
			early := false
			for i, ps := range c.rounds {
				r.round(t, ps...)
				if o := r.j.Originals(); !early && 15*(i+1) <= 60 && (len(o) != 1 || o[0].Target.PID != 7) {
					t.Errorf("%d s after the restart, within the bound: journaled originals %+v, want PID 7's still", 15*(i+1), o)
					early = true
				}
			}
			r.exit(t, c.open, c.calls)
			out := r.log.String()
			if n := strings.Count(out, unnamedLog); n != min(len(c.logged), 1) {
				t.Fatalf("%d lines saying the successor cannot be told, want %d:\n%s", n, min(len(c.logged), 1), out)
			}
			if c.logged == "" {
				return
			}
			for _, w := range []string{"level=warn", "tenant=embed", "gpu=GPU-0", "pid=7", `candidates="` + c.logged + `"`, "pid=N"} {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A crash, or an exit, between the restart and the successor's coming
// leaves the original open in the journal with what was on the GPU at the
// restart (what the rounds saw within the minute before it): the next
// start goes on looking, and sets back the successor it finds within the
// bound, once the bound has passed (not at once: a second new process may
// still come); it closes the original as gone, saying so, where the
// restart is older than the bound, or dated after the start's clock (the
// host's clock set back across the crash: the bound cannot be counted).
// (Before, the next start closed the original as gone: the old PID was,
// and the successor kept the tuner's cap; an exit restarted the old PID,
// gone. Then a start set back at once a process the restart's sample had
// missed, and a start whose clock was behind the restart's looked for a
// successor until its clock caught up, taking any new process of the
// tenant meanwhile.)
func TestUnnamedSuccessorAcrossStarts(t *testing.T) {
	before := []proc{{7, "embed"}, {8, "batch"}}
	after := []proc{{8, "batch"}, {9, "embed"}}
	for _, c := range []struct {
		name string
		seen []proc // a round 15 s before the restart, nil for none
		exit bool   // the first run exits 5 s after the restart, else crashes
		at   time.Duration
		// first are the processes at the next start, at after the
		// restart; then come five rounds 15 s apart on then
		first, then []proc
		calls       []string
		logged      bool
	}{
		{"crash, found at start", nil, false, 20 * time.Second, after, after, restoredOn9, false},
		{"crash, found in a later round", nil, false, 5 * time.Second, []proc{{8, "batch"}}, after, restoredOn9, false},
		{"exit, found at the next start", nil, true, 20 * time.Second, after, after, restoredOn9, false},
		{"crash, a process of the tenant the restart's sample missed", []proc{{7, "embed"}, {12, "embed"}, {8, "batch"}}, false, 20 * time.Second,
			[]proc{{8, "batch"}, {12, "embed"}}, []proc{{8, "batch"}, {12, "embed"}, {9, "embed"}}, restoredOn9, false},
		{"crash, the next start past the bound", nil, false, 5 * time.Minute, after, after, nil, true},
		{"crash, the next start's clock an hour behind", nil, false, -time.Hour, []proc{{8, "batch"}}, []proc{{8, "batch"}, {40, "embed"}}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			r := newUnnamedRun(t, p)
			r.clk.Advance(2 * time.Hour) // a next start may be behind it
			if c.seen != nil {
				r.round(t, c.seen...)
				r.clk.Advance(15 * time.Second)
			}
			restartAt := r.clk.Now()
			r.restart(t, before...)
			if c.exit {
				r.clk.Advance(5 * time.Second)
				if _, err := r.tu.Restore(context.Background()); err == nil || len(r.host.Calls) != 0 {
					t.Fatalf("restore at exit before the successor came: calls %q, error %v; want none, left for the next start", r.host.Calls, err)
				}
			}
			if err := r.j.Close(); err != nil {
				t.Fatal(err)
			}
			next := newUnnamedRun(t, p)
			next.clk.Set(restartAt.Add(c.at))
			if _, err := next.tu.Recover(context.Background(), tenantSnap(next.clk.Now(), c.first...)); err != nil {
				t.Fatal(err)
			}
			if len(next.host.Calls) != 0 {
				t.Fatalf("next start, within the bound: calls %q, want none until it has passed", next.host.Calls)
			}
			for range 5 {
				next.round(t, c.then...)
			}
			if !slices.Equal(next.host.Calls, c.calls) || len(next.j.Originals()) != 0 {
				t.Errorf("next start: calls %q, %d originals open; want %q, none", next.host.Calls, len(next.j.Originals()), c.calls)
			}
			if got := strings.Contains(next.log.String(), unnamedLog); got != c.logged {
				t.Errorf("logged that the successor cannot be told: %v, want %v:\n%s", got, c.logged, next.log.String())
			}
		})
	}
}

// slowHost is a restart hook that takes 40 s a restart, and notes when
// each started.
type slowHost struct {
	successorHost
	clk     *gpu.ManualClock
	started map[uint32]time.Time
}

func (s *slowHost) RestartClient(ctx context.Context, uuid string, pid uint32, tenant string) error {
	if s.started == nil {
		s.started = map[uint32]time.Time{}
	}
	s.started[pid] = s.clk.Now()
	s.clk.Advance(40 * time.Second)
	return s.successorHost.RestartClient(ctx, uuid, pid, tenant)
}

// A restarted record is dated at its hook's start, which the next start
// counts the bound from, not at the round's start: an earlier hook of the
// same round may have run long. (Before, every record of a round carried
// the round's time.)
func TestRestartedRecordDatedAtHookStart(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	clk := gpu.NewManualClock(t0)
	host := &slowHost{clk: clk}
	batch8 := Action{Target: Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 8}, Tenant: "batch", Current: Fraction(1), Want: Fraction(0.5), Restart: true, Reason: "test"}
	tu, err := New(Options{Policy: fixed{batch8, mpsAction(7, 1, 0.5)}, Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), tenantSnap(clk.Now(), proc{7, "embed"}, proc{8, "batch"})); err != nil {
		t.Fatal(err)
	}
	o := j.Originals()
	if len(o) != 2 {
		t.Fatalf("journaled originals %+v, want two", o)
	}
	for _, o := range o {
		if o.Restart == nil || !o.Restart.At.Equal(host.started[o.Target.PID]) {
			t.Errorf("PID %d: restarted record %+v, want it dated at its hook's start, +%v", o.Target.PID, o.Restart, host.started[o.Target.PID].Sub(t0))
		}
	}
}

// A restarted record, compacted, keeps its time and what was on the GPU.
func TestRestartedRecordSurvivesCompaction(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, p)
	tg := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}
	if err := j.Append(Record{Time: t0, Event: EventOriginal, Target: tg, Tenant: "embed", From: encodeValue(Fraction(1))}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(Record{Time: t0.Add(time.Second), Event: EventRestarted, Target: tg, Tenant: "embed", PIDs: []uint32{7, 12}, Others: []uint32{8}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j2 := openJournal(t, p)
	defer j2.Close()
	o := j2.Originals()
	if len(o) != 1 || o[0].Restart == nil || !o[0].Restart.At.Equal(t0.Add(time.Second)) || !slices.Equal(o[0].Restart.Kin, []uint32{7, 12}) || !slices.Equal(o[0].Restart.Others, []uint32{8}) {
		t.Fatalf("after compaction and reopening: %+v", o)
	}
}

// A restarted record names an MPS client; its processes (pids, others)
// belong to it alone.
func TestRestartedRecordChecked(t *testing.T) {
	mps := Target{GPU: uuid0, Knob: gpu.KnobMPSActiveThreads, PID: 7}
	for _, c := range []struct {
		name string
		rec  Record
		ok   bool
	}{
		{"an MPS client's", Record{Event: EventRestarted, Target: mps, Tenant: "embed", PIDs: []uint32{7}, Others: []uint32{8}}, true},
		{"a device knob's", Record{Event: EventRestarted, Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, PIDs: []uint32{7}}, false},
		{"others in an original", Record{Event: EventOriginal, Target: mps, From: encodeValue(Fraction(1)), Others: []uint32{8}}, false},
		{"PID 0 among others", Record{Event: EventRestarted, Target: mps, Others: []uint32{0}}, false},
	} {
		if err := validRecord(c.rec); (err == nil) != c.ok {
			t.Errorf("%s: %v, want valid %v", c.name, err, c.ok)
		}
	}
	// The refusal says what is wrong: a process ID no process has.
	rec := Record{Event: EventRestarted, Target: mps, Tenant: "embed", PIDs: []uint32{7}, Others: []uint32{8, 0}}
	if err := validRecord(rec); err == nil || !strings.Contains(err.Error(), "process ID 0") {
		t.Errorf("a record naming PID 0: %v, want it to name process ID 0", err)
	}
}
