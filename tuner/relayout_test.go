package tuner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func migDev(uuid string, pid uint32) gpu.Device {
	return gpu.Device{UUID: uuid, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		MIG:       []gpu.MIGInstance{{UUID: "MIG-" + uuid, GPUInstanceID: 1, Profile: "3g.40gb"}},
		Processes: []gpu.Process{{PID: pid, GPUInstanceID: 1}}}
}

func relayoutOf(uuid string) Action {
	l := []string{"1g.10gb", "3g.40gb"}
	return Action{Target: Target{GPU: uuid, Knob: gpu.KnobMIGLayout}, Want: LayoutOf(l), Reason: "test",
		Plan: &gpu.Plan{MIG: []gpu.MIGLayoutPlan{{UUID: uuid, Profiles: l}}}}
}

// relayoutOnce is a policy that plans a relayout of uuid in its first
// round and nothing after.
func relayoutOnce(uuid string) deciderFunc {
	once := false
	return func(*State) []Action {
		if once {
			return nil
		}
		once = true
		return []Action{relayoutOf(uuid)}
	}
}

// relayoutRun runs one relayout on host with a journal, then Progress
// every second for a minute; it returns the tuner, its decisions as
// "knob outcome" and its log.
func relayoutRun(t *testing.T, host *migHost, journal string) (*Tuner, []string, string) {
	t.Helper()
	j := openJournal(t, journal)
	t.Cleanup(func() { j.Close() })
	var buf bytes.Buffer
	clock := gpu.NewManualClock(t0)
	tu, err := New(Options{Policy: fixed{relayoutOf("GPU-m")}, Actuators: ActuatorsOf(host), Journal: j, Clock: clock, Mode: ModeEnforce,
		Logger: level.NewFilter(log.NewLogfmtLogger(log.NewSyncWriter(&buf)), level.AllowWarn())})
	if err != nil {
		t.Fatal(err)
	}
	decs, err := tu.RunOnce(context.Background(), snapshot(t0, []gpu.Device{migDev("GPU-m", 1)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for range 60 {
		clock.Advance(time.Second)
		decs = append(decs, tu.Progress(context.Background())...)
	}
	var got []string
	for _, d := range decs {
		got = append(got, fmt.Sprintf("%s %s", d.Knob, d.Outcome))
	}
	return tu, got, buf.String()
}

// A process a relayout stopped and could not start again is started on a
// later try, within relayoutStartTries; after the last, the failure is a
// failed decision logged at error level, and the process stays journaled
// as running until a restore starts it.
func TestRelayoutRetriesStarts(t *testing.T) {
	tests := []struct {
		name       string
		DrainErr   error
		StartFails int
		always     bool
		want       []string // decisions
		starts     int
	}{
		{name: "started at once", want: []string{"mig_drain applied", "mig_layout applied"}, starts: 1},
		{name: "started on the second try", StartFails: 1,
			want: []string{"mig_drain applied", "mig_layout applied", "process_lifecycle applied"}, starts: 2},
		{name: "started on the last try", StartFails: relayoutStartTries - 1,
			want: []string{"mig_drain applied", "mig_layout applied", "process_lifecycle applied"}, starts: relayoutStartTries},
		{name: "never started", always: true,
			want: []string{"mig_drain applied", "mig_layout applied", "process_lifecycle failed"}, starts: relayoutStartTries},
		{name: "drain failed, started on a retry", DrainErr: errors.New("drain failed"), StartFails: 1,
			want: []string{"mig_layout failed", "process_lifecycle applied"}, starts: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host := &migHost{Busy: 1, DrainErr: tc.DrainErr, StartFails: tc.StartFails}
			if tc.always {
				host.StartErr = errors.New("start refused")
			}
			path := filepath.Join(t.TempDir(), "journal")
			tu, got, logs := relayoutRun(t, host, path)
			if !slices.Equal(got, tc.want) {
				t.Errorf("decisions %q, want %q", got, tc.want)
			}
			var starts int
			for _, c := range host.Calls {
				if c == "start 1" {
					starts++
				}
			}
			if starts != tc.starts {
				t.Errorf("%d starts (%v), want %d", starts, host.Calls, tc.starts)
			}
			if tu.Underway() {
				t.Error("the relayout is still under way after its last try")
			}
			open := 0
			if tc.always {
				open = 1
			}
			if u := tu.Status().Unrestored; u != open {
				t.Errorf("%d unrestored on /tuner, want %d", u, open)
			}
			if loud := strings.Contains(logs, "level=error") && strings.Contains(logs, "could not start a process again"); loud != tc.always {
				t.Errorf("error logged %v, want %v:\n%s", loud, tc.always, logs)
			}
			if !tc.always {
				return
			}
			// The journal still holds the process as running: the restore
			// at exit starts it.
			host.StartErr = nil
			if _, err := tu.Restore(context.Background()); err != nil {
				t.Fatal(err)
			}
			if host.Calls[len(host.Calls)-1] != "start 1" || tu.Status().Unrestored != 0 {
				t.Errorf("the restore did not start the process: calls %v, %d unrestored", host.Calls, tu.Status().Unrestored)
			}
		})
	}
}

// A crash while a relayout's instances drain leaves its processes
// journaled as running: the next start's recovery starts them.
func TestRelayoutCrashStartsProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	host := &migHost{Busy: 1000} // never drained: the run "crashes" while draining
	tu, err := New(Options{Policy: fixed{relayoutOf("GPU-m")}, Actuators: ActuatorsOf(host), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), snapshot(t0, []gpu.Device{migDev("GPU-m", 1)}, nil)); err != nil {
		t.Fatal(err)
	}
	if !tu.Underway() {
		t.Fatal("no relayout under way")
	}
	j.Close() // no restore: a crash

	j2 := openJournal(t, path)
	defer j2.Close()
	after := &migHost{}
	tu2, err := New(Options{Policy: fixed{}, Actuators: ActuatorsOf(after), Journal: j2, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu2.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after.Calls, []string{"start 1"}) || len(j2.Originals()) != 0 {
		t.Errorf("recovery calls %v, %d originals open; want [start 1] and none", after.Calls, len(j2.Originals()))
	}
}

// A relayout under way when the kill switch is engaged is given up: its
// processes start again in the old layout at once, and the layout is not
// set once the instances are empty (the switch changes nothing but
// reverts).
func TestRelayoutGivenUpAtKillSwitch(t *testing.T) {
	for _, by := range []string{"round", "progress"} {
		t.Run(by, func(t *testing.T) {
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			host := &migHost{Busy: 2} // drained after two looks
			kill := &KillSwitch{}
			clock := gpu.NewManualClock(t0)
			pol := relayoutOnce("GPU-m")
			tu, err := New(Options{Policy: pol, Guards: []Guard{kill}, Actuators: ActuatorsOf(host), Journal: j, Clock: clock, Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			snap := snapshot(t0, []gpu.Device{migDev("GPU-m", 1)}, nil)
			if _, err := tu.RunOnce(context.Background(), snap); err != nil || !tu.Underway() {
				t.Fatalf("no relayout under way: %v", err)
			}
			kill.Engaged.Store(true)
			var decs []Decision
			for i := range 5 {
				clock.Advance(time.Second)
				if by == "round" {
					s := *snap
					s.Time = clock.Now()
					d, _ := tu.RunOnce(context.Background(), &s)
					decs = append(decs, d...)
				} else {
					decs = append(decs, tu.Progress(context.Background())...)
				}
				if i == 0 && tu.Underway() {
					t.Error("the relayout still under way with the kill switch engaged")
				}
			}
			for _, c := range host.Calls {
				if strings.HasPrefix(c, "configure") {
					t.Errorf("the layout was set with the kill switch engaged: calls %v", host.Calls)
				}
			}
			if !slices.Contains(host.Calls, "start 1") || len(j.Originals()) != 0 {
				t.Errorf("calls %v, %d originals open: want the process started again, none open", host.Calls, len(j.Originals()))
			}
			var layout []string
			for _, d := range decs {
				if d.Knob == gpu.KnobMIGLayout {
					layout = append(layout, string(d.Outcome)+" "+d.Guard)
				}
			}
			if want := []string{"guarded " + GuardKillSwitch}; !slices.Equal(layout, want) {
				t.Errorf("layout decisions %q, want %q", layout, want)
			}
		})
	}
}

// A relayout under way is carried on once a round, whether the round
// has a slow loop or not (a policy may plan one itself), and is given up
// in the round that finds the kill switch engaged; only Progress is not
// needed for it to end.
func TestRelayoutCarriedOnByRounds(t *testing.T) {
	tests := []struct {
		name      string
		rebalance RebalancePlanner
		kill      bool
		want      []string // host calls after each of rounds 1 and 2
	}{
		{name: "no slow loop", want: []string{"drain MIG-GPU-m", "drain MIG-GPU-m configure 1g.10gb 3g.40gb start 1"}},
		{name: "slow loop", rebalance: noPlan{}, want: []string{"drain MIG-GPU-m", "drain MIG-GPU-m configure 1g.10gb 3g.40gb start 1"}},
		{name: "no slow loop, kill switch", kill: true, want: []string{"drain MIG-GPU-m start 1", "drain MIG-GPU-m start 1"}},
		{name: "slow loop, kill switch", rebalance: noPlan{}, kill: true, want: []string{"drain MIG-GPU-m start 1", "drain MIG-GPU-m start 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := &migHost{Busy: 2} // the look as it starts and the first round's find processes
			kill := &KillSwitch{}
			clock := gpu.NewManualClock(t0)
			pol := relayoutOnce("GPU-m")
			tu, err := New(Options{Policy: pol, Guards: []Guard{kill}, Actuators: ActuatorsOf(host), Clock: clock, Mode: ModeEnforce, Rebalance: tt.rebalance})
			if err != nil {
				t.Fatal(err)
			}
			snap := snapshot(t0, []gpu.Device{migDev("GPU-m", 1)}, nil)
			if _, err := tu.RunOnce(context.Background(), snap); err != nil || !tu.Underway() {
				t.Fatalf("no relayout under way: %v", err)
			}
			kill.Engaged.Store(tt.kill)
			for i, want := range tt.want {
				clock.Advance(15 * time.Second)
				s := *snap
				s.Time = clock.Now()
				if _, err := tu.RunOnce(context.Background(), &s); err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(host.Calls, " "); got != want {
					t.Errorf("after round %d: calls %q, want %q", i+1, got, want)
				}
			}
			if tu.Underway() {
				t.Error("the relayout still under way after two rounds")
			}
		})
	}
}

// The layout is tried once an instant, however many calls carry the
// relayout on then: a host's Progress and its round at the same time
// (TunerPolicy.Observe), or the round that starts it. A relayout asked
// for on a GPU that has one under way is refused; the one under way goes
// on.
func TestRelayoutLookedAtOnceAnInstant(t *testing.T) {
	ctx := context.Background()
	for _, again := range []bool{false, true} {
		t.Run(fmt.Sprintf("planned again %v", again), func(t *testing.T) {
			host := &migHost{Busy: 100}
			var pol Decider = relayoutOnce("GPU-m")
			if again {
				pol = fixed{relayoutOf("GPU-m")}
			}
			obs := EverySnapshot(pol, nil)
			snap := snapshot(t0, []gpu.Device{migDev("GPU-m", 1)}, nil)
			if err := obs.Init(ctx, ActuatorsOf(host), snap); err != nil {
				t.Fatal(err)
			}
			if looks := 100 - host.Busy; looks != 1 {
				t.Errorf("the round that started it: %d looks at the layout, want 1", looks)
			}
			var refused int
			for i := range 4 {
				s := *snap
				s.Time = t0.Add(time.Duration(i+1) * 15 * time.Second)
				before := host.Busy
				ds, err := obs.Observe(ctx, ActuatorsOf(host), &s)
				if err != nil {
					t.Fatal(err)
				}
				if looks := before - host.Busy; looks != 1 {
					t.Errorf("round %d: %d looks at the layout, want 1", i, looks)
				}
				for _, d := range ds {
					if d.Knob == gpu.KnobMIGLayout && d.Outcome == OutcomeRefused && strings.Contains(d.Reason, "under way") {
						refused++
					}
				}
			}
			if drains := strings.Count(strings.Join(host.Calls, " "), "drain"); drains != 1 {
				t.Errorf("%d drains, want 1: %q", drains, host.Calls)
			}
			if again && refused == 0 {
				t.Error("a relayout asked for again while one is under way was not refused")
			}
		})
	}
}
