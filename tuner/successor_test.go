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
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	r := &unnamedRun{host: &successorHost{}, clk: gpu.NewManualClock(t0), j: j, path: path, log: &strings.Builder{}}
	r.tu, err = New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(r.host), Journal: j, Clock: r.clk, Mode: ModeEnforce,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(r.log))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

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

// unnamedLog is what the tuner logs when it cannot tell the successor.
const unnamedLog = "cannot tell the successor of an MPS client"

var restoredOn9 = []string{"SetMPSActiveThreads(GPU-0,9,1.0000)", "RestartClient(GPU-0,9)"}

// A client restarted through a hook that names no successor: the one new
// process of its tenant on the GPU within the bound is its successor,
// which holds its original (in the journal too) and is set back at exit.
// None within the bound, several, a new process of another tenant only,
// or a new one where another of the tenant's went too (a multi-process
// job restarted as a whole) is not taken: the original is closed once the
// old PID is gone, as before, and the tuner says so once, naming the
// candidates. (Before, the original was closed as gone whatever came,
// and nothing was logged.)
func TestUnnamedSuccessor(t *testing.T) {
	embed := func(pid uint32) proc { return proc{pid, "embed"} }
	batch := func(pid uint32) proc { return proc{pid, "batch"} }
	six := func(ps ...proc) [][]proc { return slices.Repeat([][]proc{ps}, 6) }
	for _, c := range []struct {
		name   string
		before []proc
		rounds [][]proc // every 15 s after the restart
		open   uint32   // the PID holding the original after the rounds, 0 for none
		calls  []string // at exit
		logged string   // the candidates logged, "" for no line
	}{
		{"one candidate", []proc{embed(7), batch(8)}, six(batch(8), embed(9)), 9, restoredOn9, ""},
		{"one candidate, the tenant's other process stays", []proc{embed(7), embed(12), batch(8)}, six(batch(8), embed(12), embed(9)), 9, restoredOn9, ""},
		{"the old PID gone before its successor came", []proc{embed(7), batch(8)},
			append([][]proc{{batch(8)}, {batch(8)}, {batch(8)}}, six(batch(8), embed(9))[:3]...), 9, restoredOn9, ""},
		{"none within the bound", []proc{embed(7), batch(8)},
			append(slices.Repeat([][]proc{{batch(8)}}, 5), []proc{batch(8), embed(9)}), 0, nil, "no pid"},
		{"two candidates", []proc{embed(7), batch(8)}, six(batch(8), embed(9), embed(10)), 0, nil, "pid 9, 10"},
		{"another tenant's new process", []proc{embed(7), batch(8)}, six(batch(8), batch(11)), 0, nil, "no pid"},
		{"a multi-process job restarted as a whole", []proc{embed(7), embed(12), batch(8)}, six(batch(8), embed(9)), 0, nil, "pid 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newUnnamedRun(t, filepath.Join(t.TempDir(), "journal"))
			r.restart(t, c.before...)
			for _, ps := range c.rounds {
				r.round(t, ps...)
			}
			o := r.j.Originals()
			if c.open == 0 && len(o) != 0 || c.open != 0 && (len(o) != 1 || o[0].Target.PID != c.open || o[0].Value != Fraction(1)) {
				t.Errorf("journaled originals %+v, want 100%% on PID %d (0: none)", o, c.open)
			}
			if _, err := r.tu.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.host.Calls, c.calls) {
				t.Errorf("restore at exit: calls %q, want %q", r.host.Calls, c.calls)
			}
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
// restart: the next start sets back the successor it finds there within
// the bound (at once, or in the round that first lists it), and closes
// the original as gone, saying so, where the restart is older than the
// bound. (Before, the next start closed the original as gone: the old PID
// was, and the successor kept the tuner's cap; an exit restarted the old
// PID, gone.)
func TestUnnamedSuccessorAcrossStarts(t *testing.T) {
	before := []proc{{7, "embed"}, {8, "batch"}}
	after := []proc{{8, "batch"}, {9, "embed"}}
	for _, c := range []struct {
		name string
		exit bool          // the first run exits 5 s after the restart, else crashes
		at   time.Duration // the next start's first snapshot, after the restart
		// first are the processes at the next start, then a round
		// 15 s later on after
		first  []proc
		calls  []string
		logged bool
	}{
		{"crash, found at start", false, 20 * time.Second, after, restoredOn9, false},
		{"crash, found in a later round", false, 5 * time.Second, []proc{{8, "batch"}}, restoredOn9, false},
		{"exit, found at the next start", true, 20 * time.Second, after, restoredOn9, false},
		{"crash, the next start past the bound", false, 5 * time.Minute, after, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			r := newUnnamedRun(t, p)
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
			next.clk.Set(t0.Add(c.at))
			if _, err := next.tu.Recover(context.Background(), tenantSnap(next.clk.Now(), c.first...)); err != nil {
				t.Fatal(err)
			}
			next.round(t, after...)
			if !slices.Equal(next.host.Calls, c.calls) || len(next.j.Originals()) != 0 {
				t.Errorf("next start: calls %q, %d originals open; want %q, none", next.host.Calls, len(next.j.Originals()), c.calls)
			}
			if got := strings.Contains(next.log.String(), unnamedLog); got != c.logged {
				t.Errorf("logged that the successor cannot be told: %v, want %v:\n%s", got, c.logged, next.log.String())
			}
		})
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
}
