package tuner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An original an earlier run left is restored, at start and at exit, only
// on a GPU in enforce mode: a GPU in off or recommend is left as it is
// while another GPU enforces (its original stays open for a start that
// puts it in enforce, and the warning names it), but a pause is thawed on
// every GPU. A GPU not listed, whose index is unknown, is taken to be in
// enforce only where no mode by index could be its own.
func TestRestoreOnlyOnGPUsInEnforce(t *testing.T) {
	const (
		powerA = "SetPowerLimit(GPU-a,700)"
		powerB = "SetPowerLimit(GPU-b,700)"
		thawB  = "SetPauseDuty(GPU-b,train,[7],0)"
	)
	for _, c := range []struct {
		name  string
		host  Mode
		modes map[string]Mode
		b     bool // GPU-b listed
		calls []string
		open  []string // targets left open after the exit
	}{
		{"host in enforce", ModeEnforce, nil, true, []string{powerA, powerB, thawB}, nil},
		{"host in recommend, GPU 0 in enforce", ModeRecommend, map[string]Mode{"0": ModeEnforce}, true, []string{powerA, thawB}, []string{"GPU-b/power_limit"}},
		{"host in enforce, GPU 1 off", ModeEnforce, map[string]Mode{"1": ModeOff}, true, []string{powerA, thawB}, []string{"GPU-b/power_limit"}},
		{"host in enforce, GPU-b in recommend by UUID", ModeEnforce, map[string]Mode{"GPU-b": ModeRecommend}, true, []string{powerA, thawB}, []string{"GPU-b/power_limit"}},
		{"host in recommend", ModeRecommend, nil, true, []string{thawB}, []string{"GPU-a/power_limit", "GPU-b/power_limit"}},
		{"GPU-b not listed, host in enforce", ModeEnforce, nil, false, []string{powerA, thawB, powerB}, nil},
		{"GPU-b not listed, GPU 1 in recommend", ModeEnforce, map[string]Mode{"1": ModeRecommend}, false, []string{powerA, thawB}, []string{"GPU-b/power_limit"}},
		{"GPU-b not listed, host in recommend, GPU 0 in enforce", ModeRecommend, map[string]Mode{"0": ModeEnforce}, false, []string{powerA, thawB}, []string{"GPU-b/power_limit"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, originalRec("GPU-a", 700), originalRec("GPU-b", 700),
				Record{Time: t0, Event: EventOriginal, Target: Target{GPU: "GPU-b", Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7}})
			var calls []string
			rec, pause := &recorder{}, &pauseRecorder{}
			out := &strings.Builder{}
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(rec, pause), Journal: j, Clock: gpu.NewManualClock(t0), Mode: c.host, GPUModes: c.modes,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			_, _ = tu.Recover(ctx, snapshot(t0, twoGPUs(c.b), nil))
			calls = append(append(calls, rec.Calls...), pause.Calls...)
			rec.Calls, pause.Calls = nil, nil
			_, _ = tu.Restore(ctx)
			if exit := append(rec.Calls, pause.Calls...); len(exit) > 0 {
				t.Errorf("calls at exit %q, want none (all done at start)", exit)
			}
			slices.Sort(calls)
			want := slices.Sorted(slices.Values(c.calls))
			if !slices.Equal(calls, want) {
				t.Errorf("calls %q, want %q", calls, want)
			}
			var open []string
			for _, o := range j.Originals() {
				open = append(open, o.Target.String())
			}
			slices.Sort(open)
			if !slices.Equal(open, c.open) {
				t.Errorf("open originals %q, want %q", open, c.open)
			}
			if len(c.open) > 0 && !strings.Contains(out.String(), "targets="+strings.Join(c.open, " ")) &&
				!strings.Contains(out.String(), `targets="`+strings.Join(c.open, " ")+`"`) {
				t.Errorf("no warning names %q; log:\n%s", c.open, out)
			}
		})
	}
}

// The restores at start, applied or failed, are among the status's latest
// decisions, as a round's are.
func TestRestoresAtStartInStatus(t *testing.T) {
	j := crashedJournal(t, originalRec("GPU-a", 700), originalRec("GPU-b", 700))
	rec := &recorder{}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&failOnGPU{recorder: rec, gpu: "GPU-b"}), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := tu.Recover(context.Background(), snapshot(t0, twoGPUs(true), nil))
	got := tu.Status().Recent
	if len(ds) != 2 || !slices.EqualFunc(got, ds, func(a, b Decision) bool { return a.GPU == b.GPU && a.Outcome == b.Outcome && a.Reason == b.Reason }) {
		t.Fatalf("status decisions %+v, want the restores %+v", got, ds)
	}
	outcomes := map[string]Outcome{}
	for _, d := range got {
		outcomes[d.GPU] = d.Outcome
	}
	if outcomes["GPU-a"] != OutcomeRestored || outcomes["GPU-b"] != OutcomeFailed {
		t.Errorf("outcomes %v, want GPU-a restored, GPU-b failed", outcomes)
	}
}

// failOnGPU fails every power limit set on one GPU.
type failOnGPU struct {
	*recorder
	gpu string
}

func (f *failOnGPU) SetPowerLimit(ctx context.Context, uuid string, w float64) error {
	if uuid == f.gpu {
		return errors.New("insufficient permissions")
	}
	return f.recorder.SetPowerLimit(ctx, uuid, w)
}

// What a start finds open in the journal is not always a crash's: a clean
// exit keeps open what it leaves on a GPU out of enforce mode. The start's
// warning and the reason of its restores (on /tuner, in the log) name the
// causes it cannot tell apart rather than an unclean exit that may not have
// happened.
func TestStartRestoreDoesNotClaimACrash(t *testing.T) {
	for _, c := range []struct {
		name string
		exit func(t *testing.T, j *Journal) // the earlier run
	}{
		{"killed", func(*testing.T, *Journal) {}},
		{"exited cleanly with GPU 1 in recommend", func(t *testing.T, j *Journal) {
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0),
				Mode: ModeEnforce, GPUModes: map[string]Mode{"1": ModeRecommend}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			_, _ = tu.Recover(ctx, snapshot(t0, twoGPUs(true), nil))
			if _, err := tu.Restore(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			j := reopen(t, writeJournal(t, p, originalRec("GPU-b", 700)), p)
			c.exit(t, j)
			j = reopen(t, j, p)
			logged := &strings.Builder{}
			LogJournalRecovery(log.NewLogfmtLogger(logged), p, j, true)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			d, err := tu.Recover(context.Background(), snapshot(t0, twoGPUs(true), nil))
			if err != nil || len(d) != 1 || d[0].Outcome != OutcomeRestored {
				t.Fatalf("start's restore: %+v, %v; want GPU-b's power limit restored", d, err)
			}
			for what, text := range map[string]string{"reason": d[0].Reason, "warning": logged.String()} {
				if strings.Contains(text, "after an unclean exit") || strings.Contains(text, "(unclean exit)") ||
					!strings.Contains(text, "not in enforce mode at") {
					t.Errorf("the start's %s asserts a crash, or leaves out a GPU not in enforce: %s", what, text)
				}
			}
		})
	}
}

// A restore at start says what it sets back from: the value the journal
// holds as last set (an applied or rolled-back record, kept through a
// compaction), marked as the journaled one, not a reading; nothing where
// the journal holds no value set.
func TestStartRestoreFromJournaledValue(t *testing.T) {
	pw := Target{GPU: "GPU-a", Knob: gpu.KnobPowerLimit}
	set := func(ev Outcome, w float64) Record {
		return Record{Time: t0, Event: string(ev), Target: pw, From: encodeValue(Watts(700)), To: encodeValue(Watts(w))}
	}
	for _, c := range []struct {
		name    string
		recs    []Record
		compact bool
		from    string
	}{
		{"applied", []Record{originalRec("GPU-a", 700), set(OutcomeApplied, 490)}, false, "490W (last set, as journaled)"},
		{"applied, then a refusal", []Record{originalRec("GPU-a", 700), set(OutcomeApplied, 490), set(OutcomeRefused, 400)}, false, "490W (last set, as journaled)"},
		{"rolled back", []Record{originalRec("GPU-a", 700), set(OutcomeApplied, 490), set(OutcomeRolledBack, 600)}, false, "600W (last set, as journaled)"},
		{"applied, compacted", []Record{originalRec("GPU-a", 700), set(OutcomeApplied, 490)}, true, "490W (last set, as journaled)"},
		{"none set", []Record{originalRec("GPU-a", 700), set(OutcomePlanned, 490)}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, c.recs...)
			if c.compact {
				if err := j.Compact(); err != nil {
					t.Fatal(err)
				}
				p := j.Path()
				j = reopen(t, j, p)
			}
			logged := &strings.Builder{}
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce,
				Logger: log.NewLogfmtLogger(logged)})
			if err != nil {
				t.Fatal(err)
			}
			d, err := tu.Recover(context.Background(), snapshot(t0, twoGPUs(false), nil))
			// the log says it as the page does
			if from := cmp.Or(c.from, "unknown"); !strings.Contains(logged.String(), fmt.Sprintf("from=%q", from)) && !strings.Contains(logged.String(), "from="+from+" ") {
				t.Errorf("the restore's log line does not say from %q:\n%s", from, logged)
			}
			if err != nil || len(d) != 1 || d[0].Outcome != OutcomeRestored {
				t.Fatalf("start's restore: %+v, %v", d, err)
			}
			if d[0].From != c.from || d[0].To != "700W" {
				t.Errorf("restored from %q to %q, want from %q to 700W", d[0].From, d[0].To, c.from)
			}
		})
	}
}
