package tuner

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// testBoot and otherBoot are boot IDs of two boots of a host.
const (
	testBoot  = "0b6f5a3e-3c1d-4a7e-9b2f-5d8c7e6a1f00"
	otherBoot = "7d2e9c41-8a5b-4f3e-a1c6-2b9d0e8f7a11"
)

// idPause is a pause actuator that tells processes apart (as the host's
// freezer does): the boot ID and the start time of each running PID.
type idPause struct {
	flakyPause
	boot   string
	starts map[uint32]uint64
	err    error
	// cgroups are the cgroup each PID is frozen by; live are the cgroups
	// there now (by path: their ID), thawed those ThawCgroups thawed.
	cgroups map[uint32]gpu.Cgroup
	live    map[string]uint64
	thawed  []gpu.Cgroup
}

var _ gpu.ProcessIdentifier = (*idPause)(nil)

func (p *idPause) Cgroups(pids []uint32) ([]gpu.Cgroup, error) {
	if p.err != nil {
		return nil, p.err
	}
	var out []gpu.Cgroup
	for _, pid := range pids {
		if c, ok := p.cgroups[pid]; ok && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (p *idPause) ThawCgroups(_ context.Context, _ string, cgs []gpu.Cgroup) ([]gpu.Cgroup, error) {
	var out []gpu.Cgroup
	for _, c := range cgs {
		if id, ok := p.live[c.Path]; ok && id == c.ID {
			out = append(out, c)
		}
	}
	p.thawed = append(p.thawed, out...)
	return out, nil
}

func (p *idPause) ProcessStarts(pids []uint32) (string, []uint64, error) {
	return processStarts(p.boot, p.starts, p.err, pids)
}

// processStarts is a gpu.ProcessStarter's answer on a host booted as boot
// whose processes started at starts (0: not running), failing with err
// where it is set.
func processStarts(boot string, starts map[uint32]uint64, err error, pids []uint32) (string, []uint64, error) {
	if err != nil {
		return "", nil, err
	}
	out := make([]uint64, len(pids))
	for i, pid := range pids {
		out[i] = starts[pid]
	}
	return boot, out, nil
}

// A pause is journaled with its processes' identity (the boot ID and each
// PID's start time, as the actuator reads them); a pause set on more
// processes keeps the start times journaled of those it held (read again,
// a PID may name another process by then) and reads the new ones'; a pause
// journaled without them (an earlier version, an actuator that tells no
// processes apart) stays without them. The cgroups the actuator freezes
// for the processes are journaled with them.
func TestPauseJournalsItsProcesses(t *testing.T) {
	p := &idPause{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 200}, cgroups: map[uint32]gpu.Cgroup{7: podCgroup, 8: podCgroup}}
	j := writeJournal(t, t.TempDir()+"/journal")
	defer j.Close()
	tu, err := New(Options{Policy: fixed{pauseAction("train", gpu.ClassBatch, 0, 0.5)}, Guards: []Guard{Bounds{}}, Enabled: pauseOn,
		Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	origs := j.Originals()
	if len(origs) != 1 || origs[0].Boot != testBoot || !slices.Equal(origs[0].Starts, []uint64{100, 200}) || !slices.Equal(origs[0].Cgroups, []gpu.Cgroup{podCgroup}) {
		t.Fatalf("originals %+v, want the pause's with boot %s, start times [100 200] and cgroup %v", origs, testBoot, podCgroup)
	}
	o := origs[0]
	p.starts = map[uint32]uint64{7: 999, 9: 300} // 7 another's now, 8 gone, 9 new
	for _, c := range []struct {
		name string
		o    Original
		want Identity
	}{
		{"this boot", o, Identity{Boot: testBoot, Starts: []uint64{100, 200, 300}}},
		{"an earlier boot", Original{PIDs: o.PIDs, Identity: Identity{Boot: otherBoot, Starts: []uint64{100, 200}}}, Identity{Boot: testBoot, Starts: []uint64{0, 0, 300}}},
		{"journaled without", Original{PIDs: o.PIDs}, Identity{}},
	} {
		if got := tu.identityFor(c.o, []uint32{7, 8, 9}); got.Boot != c.want.Boot || !slices.Equal(got.Starts, c.want.Starts) {
			t.Errorf("%s: identity %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A thaw after a crash passes over a journaled PID whose process is not
// the one paused (another boot, another start time, none running then):
// the group that PID is in now is never touched (its actuator is not
// asked for it), and the original is closed, saying which processes were
// gone. A pause journaled without its processes' identity, or one the
// actuator cannot tell now, is thawed by PID, as before.
func TestThawPassesOverAnotherProcess(t *testing.T) {
	rec := func(id Identity) Record {
		return Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7},
			Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}, Identity: id}
	}
	now := map[uint32]uint64{7: 100, 8: 200}
	for _, c := range []struct {
		name string
		id   Identity
		err  error // the actuator's, telling processes apart now
		call string
		why  string
	}{
		{"the same processes", Identity{Boot: testBoot, Starts: []uint64{100, 200}}, nil, "[7 8]", ""},
		{"PID 8 another's", Identity{Boot: testBoot, Starts: []uint64{100, 150}}, nil, "[7]", "PID 8 (another process holds it now, or none)"},
		{"PID 8 not running then", Identity{Boot: testBoot, Starts: []uint64{100, 0}}, nil, "[7]", "PID 8 (another process holds it now, or none)"},
		{"paused before a reboot", Identity{Boot: otherBoot, Starts: []uint64{100, 200}}, nil, "[]", "7 (paused before the host's last boot), 8 (paused before"},
		{"journaled without (an earlier version)", Identity{}, nil, "[7 8]", ""},
		{"the actuator cannot tell now", Identity{Boot: otherBoot, Starts: []uint64{100, 200}}, errors.New("no boot ID"), "[7 8]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, rec(c.id))
			p := &idPause{boot: testBoot, starts: now, err: c.err}
			d := recoverWith(t, j, p)
			if want := []string{"SetPauseDuty(GPU-0,train," + c.call + ",0)"}; !slices.Equal(p.Calls, want) {
				t.Errorf("calls %q, want %q", p.Calls, want)
			}
			if len(d) != 1 || !d[0].Applied || !strings.Contains(d[0].Reason, c.why) || (c.why == "") == strings.Contains(d[0].Reason, "process gone") {
				t.Errorf("decisions %+v, want the thaw applied, its reason naming %q", d, c.why)
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d open originals after the thaw, want 0", n)
			}
		})
	}
}

// A thaw while the tuner runs (here at the kill switch) passes over a
// paused process whose PID another process took since.
func TestThawWhileRunningPassesOverAnotherProcess(t *testing.T) {
	p := &idPause{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 200}}
	j := writeJournal(t, t.TempDir()+"/journal")
	defer j.Close()
	kill := &KillSwitch{}
	tu, err := New(Options{Policy: fixed{pauseAction("train", gpu.ClassBatch, 0, 0.5)}, Guards: []Guard{kill, Bounds{}}, Enabled: pauseOn,
		Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	p.starts = map[uint32]uint64{7: 100, 8: 999}
	kill.Engaged.Store(true)
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	want := []string{"SetPauseDuty(GPU-0,train,[7 8],0.5)", "SetPauseDuty(GPU-0,train,[7],0)"}
	if !slices.Equal(p.Calls, want) {
		t.Errorf("calls %q, want %q", p.Calls, want)
	}
}

// The journal takes a pause record's identity only beside its PIDs, one
// start time each, within bounds, with a boot ID that is a UUID.
func TestJournalValidIdentity(t *testing.T) {
	pause := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}
	orig := func(pids []uint32, id Identity) Record {
		return Record{Time: t0, Event: EventOriginal, Target: pause, Tenant: "train", From: encodeValue(Duty(0)), PIDs: pids, Identity: id}
	}
	for _, c := range []struct {
		name string
		r    Record
		ok   bool
	}{
		{"an original", orig([]uint32{7, 8}, Identity{Boot: testBoot, Starts: []uint64{1, 0}}), true},
		{"a processes record", Record{Time: t0, Event: EventProcesses, Target: pause, PIDs: []uint32{9}, Identity: Identity{Boot: testBoot, Starts: []uint64{maxJournalTicks}}}, true},
		{"none (an earlier version)", orig([]uint32{7, 8}, Identity{}), true},
		{"a boot ID not a UUID", orig([]uint32{7}, Identity{Boot: "boot", Starts: []uint64{1}}), false},
		{"a boot ID in capitals", orig([]uint32{7}, Identity{Boot: strings.ToUpper(testBoot), Starts: []uint64{1}}), false},
		{"start times without a boot ID", orig([]uint32{7}, Identity{Starts: []uint64{1}}), false},
		{"a boot ID without start times", orig([]uint32{7}, Identity{Boot: testBoot}), false},
		{"a start time too few", orig([]uint32{7, 8}, Identity{Boot: testBoot, Starts: []uint64{1}}), false},
		{"no processes", orig(nil, Identity{Boot: testBoot}), false},
		{"a start time out of range", orig([]uint32{7}, Identity{Boot: testBoot, Starts: []uint64{maxJournalTicks + 1}}), false},
		{"on another knob", Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, From: encodeValue(Watts(700)), Identity: Identity{Boot: testBoot}}, false},
		{"in a restored record", Record{Time: t0, Event: EventRestored, Target: pause, PIDs: []uint32{7}, Identity: Identity{Boot: testBoot, Starts: []uint64{1}}}, false},
	} {
		if err := validRecord(c.r); (err == nil) != c.ok {
			t.Errorf("%s: %v, want valid %v", c.name, err, c.ok)
		}
	}
}

// A pause's identity is read back as journaled: the processes record's
// replaces the original's with its PIDs, and a compaction keeps it.
func TestJournalKeepsIdentity(t *testing.T) {
	pause := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}
	path := t.TempDir() + "/journal"
	j := writeJournal(t, path,
		Record{Time: t0, Event: EventOriginal, Target: pause, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7}, Identity: Identity{Boot: testBoot, Starts: []uint64{100}}},
		Record{Time: t0, Event: EventProcesses, Target: pause, Tenant: "train", PIDs: []uint32{7, 9}, Identity: Identity{Boot: testBoot, Starts: []uint64{100, 300}}})
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	origs := reopen(t, j, path).Originals()
	if len(origs) != 1 || !slices.Equal(origs[0].PIDs, []uint32{7, 9}) || origs[0].Boot != testBoot || !slices.Equal(origs[0].Starts, []uint64{100, 300}) {
		t.Errorf("originals after a compaction %+v, want PIDs [7 9] started at [100 300] on %s", origs, testBoot)
	}
}

// Where the pause actuator cannot tell processes apart now (the boot ID
// unreadable), or name the cgroups it freezes, the warning is logged once
// an hour on the tuner's clock, not at every pause and every follow,
// saying how many were not logged.
func TestUnidentifiedWarnedOnceAnHour(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		read      func(*Tuner, []uint32)
	}{
		{"identity", "cannot tell the processes it pauses", func(tu *Tuner, pids []uint32) { tu.identify(pids) }},
		{"cgroups", "cannot name the cgroups it pauses", func(tu *Tuner, pids []uint32) { tu.cgroupsOf(pids) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			clock := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed{}, Actuators: ActuatorsOf(&idPause{err: errors.New("unreadable")}), Clock: clock, Mode: ModeEnforce,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
			if err != nil {
				t.Fatal(err)
			}
			for range 30 { // a pause and a follow a minute for half an hour
				c.read(tu, []uint32{7})
				c.read(tu, []uint32{8})
				clock.Advance(time.Minute)
			}
			if n := strings.Count(buf.String(), c.msg); n != 1 {
				t.Fatalf("%d warnings in 30 minutes, want 1:\n%s", n, buf.String())
			}
			clock.Advance(31 * time.Minute)
			c.read(tu, []uint32{7})
			if n := strings.Count(buf.String(), c.msg); n != 2 || !strings.Contains(buf.String(), "not_logged=59") {
				t.Fatalf("%d warnings after an hour, want 2, the second saying 59 not logged:\n%s", n, buf.String())
			}
		})
	}
}
