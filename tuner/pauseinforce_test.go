package tuner

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// reportingPause is a pause actuator that reports what it is told to say
// is in force.
type reportingPause struct {
	pauseRecorder
	inForce  []gpu.PauseInForce
	failures map[string]uint64
	period   time.Duration
}

func (p *reportingPause) PausesInForce() []gpu.PauseInForce      { return p.inForce }
func (p *reportingPause) PauseFreezeFailures() map[string]uint64 { return p.failures }
func (p *reportingPause) PausePeriod() time.Duration             { return p.period }

// The status gives a pause's value in effect as the pause actuator
// reports it (the duty in force, 0 where its freeze failed), and its
// failed freezes and its period (a failure counts at most once a period);
// unknown where the actuator does not report them.
func TestPauseInForceInStatus(t *testing.T) {
	ctx := context.Background()
	pause := func(s *Status) Setting {
		t.Helper()
		for _, st := range s.Settings {
			if st.Knob == gpu.KnobPauseDuty {
				return st
			}
		}
		t.Fatalf("no pause setting in %+v", s.Settings)
		return Setting{}
	}
	for _, c := range []struct {
		name     string
		inForce  []gpu.PauseInForce
		failures map[string]uint64
		report   bool
		want     Value
		// wantFailures are the failed freezes in the status: served
		// from 0 for a tenant paused, so that increase() counts the first
		wantFailures map[string]uint64
	}{
		{"in force", []gpu.PauseInForce{{UUID: uuid0, Tenant: "train", Duty: 0.5}}, nil, true, Duty(0.5), map[string]uint64{"train": 0}},
		{"larger, another GPU's", []gpu.PauseInForce{{UUID: uuid0, Tenant: "train", Duty: 0.7}, {UUID: "GPU-1", Tenant: "train", Duty: 0.7}}, nil, true, Duty(0.7), map[string]uint64{"train": 0}},
		{"freeze failed", []gpu.PauseInForce{{UUID: uuid0, Tenant: "train", FreezeFailed: true}}, map[string]uint64{"train": 3}, true, Duty(0), map[string]uint64{"train": 3}},
		{"not paused any more", nil, map[string]uint64{"train": 1}, true, Duty(0), map[string]uint64{"train": 1}},
		{"not reported", nil, nil, false, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &reportingPause{inForce: c.inForce, failures: c.failures, period: 15 * time.Second}
			o := Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn,
				Actuators: ActuatorsOf(rec), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce}
			if c.report {
				o.Pauses = rec
			}
			tu, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(ctx, emptySnap(t0)); err != nil {
				t.Fatal(err)
			}
			if _, err := tu.RunOnce(ctx, emptySnap(t0.Add(time.Second))); err != nil {
				t.Fatal(err)
			}
			s := tu.Status()
			st := pause(s)
			if st.Target != Duty(0.5) || st.Effective != c.want {
				t.Errorf("target %v, in effect %v; want 0.5, %v", st.Target, st.Effective, c.want)
			}
			if !maps.Equal(s.PauseFreezeFailures, c.wantFailures) {
				t.Errorf("failed freezes %v, want %v", s.PauseFreezeFailures, c.wantFailures)
			}
			if want := map[bool]time.Duration{true: 15 * time.Second}[c.report]; s.PausePeriod != want {
				t.Errorf("pause period %s, want %s", s.PausePeriod, want)
			}
		})
	}
}

// A tenant paused once keeps its failed-freeze count at 0 after its pause
// ends, and the actuator's own map is not changed.
func TestPauseFreezeFailuresFromZero(t *testing.T) {
	ctx := context.Background()
	rec := &reportingPause{}
	tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn,
		Actuators: ActuatorsOf(rec), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Pauses: rec})
	if err != nil {
		t.Fatal(err)
	}
	if got := tu.Status().PauseFreezeFailures; got != nil {
		t.Errorf("before any pause: %v, want none", got)
	}
	rec.inForce = []gpu.PauseInForce{{UUID: uuid0, Tenant: "train", Duty: 0.5}}
	if _, err := tu.RunOnce(ctx, emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	rec.inForce, rec.failures = nil, map[string]uint64{"other": 2}
	if _, err := tu.RunOnce(ctx, emptySnap(t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	if got, want := tu.Status().PauseFreezeFailures, map[string]uint64{"train": 0, "other": 2}; !maps.Equal(got, want) {
		t.Errorf("after the pause: %v, want %v", got, want)
	}
	if len(rec.failures) != 1 {
		t.Errorf("the actuator's map was changed: %v", rec.failures)
	}
}
