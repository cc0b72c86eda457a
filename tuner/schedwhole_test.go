package tuner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// schedHost is a vGPU host that records every scheduler setting whole.
type schedHost struct{ calls []string }

func (h *schedHost) SetVGPUScheduler(_ context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	h.calls = append(h.calls, schedCall(uuid, s))
	return nil
}

func schedCall(uuid string, s gpu.VGPUSchedulerSetting) string { return fmt.Sprintf("%s %+v", uuid, s) }

// Operator's vGPU scheduler states the tuner changes, and their settings.
var (
	arrOn    = Scheduler{Policy: gpu.VGPUPolicyBestEffort, ARR: true, AvgFactor: 5, Frequency: 100}
	slice    = Scheduler{Policy: gpu.VGPUPolicyEqualShare, TimeSlice: 5 * time.Millisecond}
	arrOnSet = gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyBestEffort, ARREnabled: true, AvgFactor: 5, Frequency: 100}
	sliceSet = gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyEqualShare, TimeSlice: 5 * time.Millisecond}
)

// The vGPU scheduler's original is its state whole, journaled and set
// back so: the policy, adaptive round robin, the time slice, the average
// factor and the frequency. Before, it was the policy alone: a change
// that turned an operator's ARR off (best-effort to best-effort) kept
// "best-effort" as the original and the exit found the scheduler "already
// at its original value", ARR left off; one that set the policy kept the
// policy, the restore setting the driver's default time slice over the
// operator's. Where the tuner's own last change set the whole state back,
// the exit still closes it without a call, and a parameter that change
// left to the driver's default reads as whatever the default is.
func TestExitSetsSchedulerBackWhole(t *testing.T) {
	change := func(from, to Scheduler, revert bool) Action {
		return Action{Target: Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler}, Current: from, Want: to, Revert: revert, Reason: "test"}
	}
	fixedSlice := slice.WithPolicy(gpu.VGPUPolicyFixedShare)
	equal := Scheduler{Policy: gpu.VGPUPolicyEqualShare}
	for _, tc := range []struct {
		name   string
		rounds []Action
		reads  *gpu.VGPUScheduler // read by a last round, which changes nothing
		exit   []string           // the calls at exit
	}{
		{"ARR turned off", []Action{change(arrOn, Scheduler{Policy: gpu.VGPUPolicyBestEffort}, false)}, nil,
			[]string{schedCall(uuid0, arrOnSet)}},
		{"a custom time slice, the policy changed", []Action{change(slice, fixedSlice, false)}, nil,
			[]string{schedCall(uuid0, sliceSet)}},
		{"a custom time slice, the policy changed back with the default slice",
			[]Action{change(slice, fixedSlice, false), change(fixedSlice, equal, true)}, nil,
			[]string{schedCall(uuid0, sliceSet)}},
		{"changed back whole: nothing to set back", []Action{change(slice, fixedSlice, false), change(fixedSlice, slice, true)}, nil, nil},
		{"changed back whole, the default slice read", []Action{change(equal, fixedSlice, false), change(fixedSlice, equal, true)},
			&gpu.VGPUScheduler{Policy: gpu.VGPUPolicyEqualShare, TimeSlice: 2 * time.Millisecond}, nil},
		{"changed back whole, another slice read since", []Action{change(slice, fixedSlice, false), change(fixedSlice, slice, true)},
			&gpu.VGPUScheduler{Policy: gpu.VGPUPolicyEqualShare, TimeSlice: 2 * time.Millisecond}, []string{schedCall(uuid0, sliceSet)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := &schedHost{}
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			clk := gpu.NewManualClock(t0)
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.rounds {
				clk.Advance(5 * time.Minute)
				tu.o.Policy = fixed{a}
				dev := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingVGPU}
				if ds, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), []gpu.Device{dev}, nil)); err != nil || len(ds) != 1 || !ds[0].Applied {
					t.Fatalf("round of %v: %+v, %v; want it applied", a, ds, err)
				}
			}
			if tc.reads != nil {
				clk.Advance(5 * time.Minute)
				tu.o.Policy = fixed(nil)
				dev := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingVGPU, Scheduler: tc.reads}
				if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), []gpu.Device{dev}, nil)); err != nil {
					t.Fatal(err)
				}
			}
			if o := j.Originals(); len(o) != 1 || o[0].Value != tc.rounds[0].Current {
				t.Fatalf("journal's originals %+v, want %v whole", o, tc.rounds[0].Current)
			}
			host.calls = nil
			ds, err := tu.Restore(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(host.calls, tc.exit) {
				t.Errorf("calls at exit %q, want %q", host.calls, tc.exit)
			}
			if at := len(ds) == 1 && strings.Contains(ds[0].Reason, whyAtOriginal); at != (tc.exit == nil) {
				t.Errorf("exit's decisions %+v; closed as at its original: %v, want %v", ds, at, tc.exit == nil)
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d originals open after the exit", n)
			}
		})
	}
}

// The journal keeps a scheduler value whole, as an earlier version
// ignores: the policy where it was, the rest beside it. One journaled by
// the policy alone (an earlier version's) is read as that policy, the rest
// unknown (PolicyOnly); state beside a value of another kind, and a time
// slice out of NVML's range, are refused.
func TestJournalSchedulerValue(t *testing.T) {
	for _, v := range []Scheduler{arrOn, slice, {Policy: gpu.VGPUPolicyFixedShare}, {Policy: gpu.VGPUPolicyEqualShare, PolicyOnly: true}} {
		b, err := json.Marshal(encodeValue(v))
		if err != nil {
			t.Fatal(err)
		}
		var e encodedValue
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		if got, err := e.decode(); err != nil || got != v {
			t.Errorf("%v journaled as %s, read back as %v, %v", v, b, got, err)
		}
		if !strings.Contains(string(b), `"text":"`+string(v.Policy)+`"`) {
			t.Errorf("%v journaled as %s: an earlier version finds no policy in it", v, b)
		}
	}
	earlier := encodedValue{Kind: "vgpu_policy", Text: "equal-share"}
	if got, err := earlier.decode(); err != nil || got != (Scheduler{Policy: gpu.VGPUPolicyEqualShare, PolicyOnly: true}) {
		t.Errorf("an earlier version's value read as %+v, %v; want the policy alone", got, err)
	}
	for _, bad := range []encodedValue{
		{Kind: "watts", Num: 300, Sched: &encodedScheduler{ARR: true}},
		{Kind: "vgpu_policy", Text: "equal-share", Sched: &encodedScheduler{TimeSliceNs: -1}},
		{Kind: "vgpu_policy", Text: "equal-share", Sched: &encodedScheduler{TimeSliceNs: 1 << 33}},
		{Kind: "vgpu_policy", Text: "best-effort", Sched: &encodedScheduler{ARR: true, TimeSliceNs: -1}},
	} {
		rec := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler}, From: &bad}
		if err := validRecord(rec); err == nil {
			t.Errorf("record with %+v valid, want it refused", bad)
		}
	}
}

// An original an earlier version journaled by the vGPU scheduler's
// policy alone is still set back: its policy, with the rest at the
// driver's defaults, the decision and a warning at start saying that only
// the policy was known.
func TestEarlierSchedulerOriginalSetsPolicyBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	line, err := encodeRecord(Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobVGPUScheduler},
		From: &encodedValue{Kind: "vgpu_policy", Text: "equal-share"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, line, 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, path)
	defer j.Close()
	var buf bytes.Buffer
	host := &schedHost{}
	clk := gpu.NewManualClock(t0.Add(time.Hour))
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(host), Journal: j, Clock: clk, Mode: ModeEnforce, Logger: log.NewLogfmtLogger(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	dev := gpu.Device{UUID: uuid0, Up: true, Mode: gpu.SharingVGPU, Scheduler: &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyFixedShare}}
	ds, err := tu.Recover(context.Background(), snapshot(clk.Now(), []gpu.Device{dev}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{schedCall(uuid0, gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyEqualShare})}; !slices.Equal(host.calls, want) {
		t.Errorf("calls at start %q, want %q", host.calls, want)
	}
	if len(ds) != 1 || ds[0].Outcome != OutcomeRestored || ds[0].To != "equal-share (policy alone known)" {
		t.Errorf("decisions %+v, want one restored to the policy alone known", ds)
	}
	if !strings.Contains(buf.String(), "by its policy alone") || !strings.Contains(buf.String(), "adaptive round robin, the time slice") {
		t.Errorf("log %q says nothing of the policy alone known", buf.String())
	}
	if n := len(j.Originals()); n != 0 {
		t.Errorf("%d originals open after the restore", n)
	}
}
