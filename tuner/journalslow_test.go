package tuner

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// placementRecord is a record of a placement plan moving tenant, event
// at at after t0, naming moved as moved.
func placementRecord(at time.Duration, event Outcome, tenant string, moved ...string) Record {
	return Record{Time: t0.Add(at), Event: string(event), Target: Target{GPU: "GPU-a", Knob: gpu.KnobPlacement, PID: 20}, Tenant: tenant,
		From: encodeValue(Placement("GPU-a")), To: encodeValue(Placement("GPU-c")), Moved: moved}
}

// relayoutRecord is the applied record of a MIG relayout of GPU-m at at
// after t0.
func relayoutRecord(at time.Duration) Record {
	return Record{Time: t0.Add(at), Event: string(OutcomeApplied), Target: Target{GPU: "GPU-m", Knob: gpu.KnobMIGLayout}, To: encodeValue(LayoutOf([]string{"3g.40gb", "4g.40gb"}))}
}

// memoryText renders what a journal says of the slow loop, times after t0.
func memoryText(m slowLoopMemory) string {
	since := func(at map[string]time.Time) string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(at)) {
			out = append(out, fmt.Sprintf("%s %v", k, at[k].Sub(t0)))
		}
		return strings.Join(out, ", ")
	}
	return fmt.Sprintf("plan %v; moved %s; relaid out %s", m.lastPlan.Sub(t0), since(m.moved), since(m.relayouts))
}

// The journal keeps what the slow loop's next start needs: the last
// plan's time (whatever its outcome), each tenant's last move (those of a
// plan applied, the moves made of one applied in part, and, in a record of
// an older version, which has no moved list, the applied record's tenant),
// each GPU's last relayout. Its compactions keep the records that say so,
// each once, and drop a move or relayout the hold or more before now
// once a tuner has said its hold and clock.
func TestJournalKeepsTheSlowLoopsPast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	for _, rec := range []Record{
		placementRecord(-40*time.Minute, OutcomeApplied, "old"), // an older version's
		placementRecord(0, OutcomePlanned, "train"),
		placementRecord(0, OutcomeApplied, "train", "train", "batch"),
		placementRecord(time.Minute, OutcomePlanned, "embed"),
		placementRecord(time.Minute, OutcomeFailed, "embed", "embed"), // applied in part
		placementRecord(2*time.Minute, OutcomePlanned, "chat"),
		placementRecord(2*time.Minute, OutcomeRefused, "chat"),
		placementRecord(2*time.Minute, OutcomeApplied, "train", "train"), // (a hook's, settled later)
		relayoutRecord(3 * time.Minute),
	} {
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	all := "plan 2m0s; moved batch 0s, embed 1m0s, old -40m0s, train 2m0s; relaid out GPU-m 3m0s"
	for _, step := range []struct {
		name  string
		do    func()
		want  string
		lines int
	}{
		{"written", func() {}, all, 9},
		// the open compacts, the hold not known yet: every move kept
		{"reopened", func() { j.Close(); j = openJournal(t, path) }, all, 6},
		{"compacted with a hold of 30m", func() {
			j.holdSlowLoop(30*time.Minute, gpu.NewManualClock(t0.Add(3*time.Minute)).Now)
			if err := j.Compact(); err != nil {
				t.Fatal(err)
			}
		}, "plan 2m0s; moved batch 0s, embed 1m0s, train 2m0s; relaid out GPU-m 3m0s", 5},
		{"reopened again", func() { j.Close(); j = openJournal(t, path) }, "plan 2m0s; moved batch 0s, embed 1m0s, train 2m0s; relaid out GPU-m 3m0s", 5},
	} {
		step.do()
		if got := memoryText(j.slowLoop()); got != step.want {
			t.Errorf("%s: %s, want %s", step.name, got, step.want)
		}
		if n := bytes.Count(readFile(t, path), []byte("\n")); n != step.lines {
			t.Errorf("%s: %d records in the file, want %d", step.name, n, step.lines)
		}
	}
	j.Close()
}

// A record's moved list belongs to a placement record, each name a
// tenant's, at most maxJournalMoved of them.
func TestJournalMovedValidated(t *testing.T) {
	power := placementRecord(0, OutcomeApplied, "train", "train")
	power.Target.Knob, power.From, power.To = gpu.KnobPowerLimit, nil, nil
	many := make([]string, maxJournalMoved+1)
	for i := range many {
		many[i] = fmt.Sprintf("job-%d", i)
	}
	for _, tc := range []struct {
		rec  Record
		want string // "" for valid
	}{
		{placementRecord(0, OutcomeApplied, "train", "train", "embed"), ""},
		{placementRecord(0, OutcomeApplied, "train"), ""},
		{power, `moved tenants named for knob "power_limit", not placement`},
		{placementRecord(0, OutcomeApplied, "train", "train", ""), "a moved tenant's name empty or too long"},
		{placementRecord(0, OutcomeApplied, "train", strings.Repeat("x", maxJournalText+1)), "a moved tenant's name empty or too long"},
		{placementRecord(0, OutcomeApplied, "train", many...), "257 moved tenants named (at most 256)"},
	} {
		err := validRecord(tc.rec)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%v: %v, want %q", tc.rec.Moved, err, tc.want)
		}
	}
}

// A start resumes the slow loop's cool-down and holds from the journal:
// the last plan's time, the tenants moved and the GPUs relaid out within
// the hold, by the records' times; a move the hold or more old, and one
// dated after now (a clock set back), left out. It logs what it resumed.
func TestSlowLoopResumesFromTheJournal(t *testing.T) {
	j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	for _, rec := range []Record{
		placementRecord(-20*time.Minute, OutcomeApplied, "c"), // an older version's, older than the hold
		placementRecord(-5*time.Minute, OutcomePlanned, "a"),
		placementRecord(-5*time.Minute, OutcomeApplied, "a", "a", "b"),
		relayoutRecord(-3 * time.Minute),
		{Time: t0.Add(-4 * time.Minute), Event: string(OutcomeApplied), Target: Target{GPU: "GPU-n", Knob: gpu.KnobMIGDrain}}, // a relayout the tuner makes itself, begun
		placementRecord(-2*time.Minute, OutcomePlanned, "d"),
		placementRecord(-2*time.Minute, OutcomeFailed, "d", "d"), // applied in part
		placementRecord(time.Hour, OutcomeApplied, "e", "e"),
	} {
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	tu, err := New(Options{Policy: fixed(nil), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Rebalance: movesEach{hold: 10 * time.Minute},
		Journal: j, Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	got := memoryText(slowLoopMemory{lastPlan: tu.reb.lastPlan, moved: tu.reb.moved, relayouts: tu.reb.relayouts})
	if want := "plan -2m0s; moved a -5m0s, b -5m0s, d -2m0s; relaid out GPU-m -3m0s, GPU-n -4m0s"; got != want {
		t.Errorf("%s, want %s", got, want)
	}
	if want := `msg="tuner slow loop resumes its cool-down and holds from the journal" hold=10m0s last_plan=` + t0.Add(-2*time.Minute).UTC().Format(time.RFC3339) +
		` moved="a b d" relaid_out="GPU-m GPU-n"`; !strings.Contains(logs.String(), want) {
		t.Errorf("logs %q, want %q", logs.String(), want)
	}
}

// A compaction judges a move's or relayout's age on the tuner's clock, not
// on the latest record's time: one record dated ahead (written while the
// clock ran a day ahead, then stepped back) made every later compaction
// drop the moves made since, and a restart moved a tenant again minutes
// after its last move. A move dated after now is left out, as a start
// leaves it out.
func TestJournalSlowLoopPastJudgedOnTheClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	ahead := Record{Time: t0.Add(24 * time.Hour), Event: string(OutcomeRefused), Target: Target{GPU: "GPU-a", Knob: gpu.KnobPowerLimit}, Reason: "clock ahead"}
	for _, rec := range []Record{
		ahead,
		placementRecord(0, OutcomePlanned, "train"),
		placementRecord(0, OutcomeApplied, "train", "train"),
		placementRecord(time.Hour, OutcomeApplied, "embed", "embed"), // dated ahead too
	} {
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	clk := gpu.NewManualClock(t0.Add(5 * time.Minute))
	j.holdSlowLoop(30*time.Minute, clk.Now) // as a running tuner says
	if err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	if got, want := memoryText(j.slowLoop()), "plan 0s; moved train 0s; relaid out "; got != want {
		t.Errorf("compacted 5m after train's move: %s, want %s", got, want)
	}
	j.Close()
	j = openJournal(t, path)
	defer j.Close()
	tu, err := New(Options{Policy: fixed(nil), Clock: clk, Mode: ModeEnforce, Rebalance: movesEach{hold: 30 * time.Minute}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	if _, held := tu.reb.moved["train"]; !held {
		t.Errorf("train, moved 5 minutes before the restart (hold 30m), is not held after it: %v", tu.reb.moved)
	}
}
