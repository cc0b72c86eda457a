package baseline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// byName makes each baseline by its name.
var byName = map[string]func() *tuner.TunerPolicy{StaticEqualName: NewStaticEqual, UncappedName: NewUncapped}

func TestBaselines(t *testing.T) {
	mpsDev := func(procs ...gpu.Process) gpu.Device {
		return gpu.Device{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: procs}
	}
	twoTenants := []tenant.Usage{
		{Tenant: "chat", UUID: "GPU-a", PIDs: []uint32{10}},
		{Tenant: "train", UUID: "GPU-a", PIDs: []uint32{20, 21}},
		{Tenant: tenant.Unassigned, UUID: "GPU-a", PIDs: []uint32{30}},
	}
	busy := fmt.Errorf("vms running: %w", gpu.ErrBusy)
	unsupported := fmt.Errorf("no compute policy: %w", gpu.ErrNotSupported)

	tests := []struct {
		name      string
		policy    string
		devs      []gpu.Device
		usage     []tenant.Usage
		errs      map[string]error
		wantCalls []string
		wantDec   []string // "tenant knob from->to applied"
	}{
		{
			name:   "mps equal shares by tenant without tenants file",
			policy: StaticEqualName,
			devs:   []gpu.Device{mpsDev(mpsProc(10, nil), mpsProc(11, gpu.Float(1)), mpsProc(12, gpu.Float(1)), mpsProc(13, gpu.Float(1)))},
			wantCalls: []string{
				"SetMPSActiveThreads(GPU-a,10,0.2500)", "RestartClient(GPU-a,10)",
				"SetMPSActiveThreads(GPU-a,11,0.2500)", "RestartClient(GPU-a,11)",
				"SetMPSActiveThreads(GPU-a,12,0.2500)", "RestartClient(GPU-a,12)",
				"SetMPSActiveThreads(GPU-a,13,0.2500)", "RestartClient(GPU-a,13)",
			},
			wantDec: []string{
				"pid 10 mps_active_threads 100%->25% true", "pid 11 mps_active_threads 100%->25% true",
				"pid 12 mps_active_threads 100%->25% true", "pid 13 mps_active_threads 100%->25% true",
			},
		},
		{
			name:   "mps equal shares split among a tenant's clients",
			policy: StaticEqualName,
			devs:   []gpu.Device{mpsDev(mpsProc(10, gpu.Float(1)), mpsProc(20, gpu.Float(1)), mpsProc(21, gpu.Float(1/6.0)), mpsProc(30, gpu.Float(1)))},
			usage:  twoTenants,
			// 3 tenants (chat, train, pid 30): 1/3 each; train has two clients -> 1/6 each.
			wantCalls: []string{
				"SetMPSActiveThreads(GPU-a,10,0.3333)", "RestartClient(GPU-a,10)",
				"SetMPSActiveThreads(GPU-a,20,0.1667)", "RestartClient(GPU-a,20)",
				"SetMPSActiveThreads(GPU-a,30,0.3333)", "RestartClient(GPU-a,30)",
			},
			wantDec: []string{
				"chat mps_active_threads 100%->33.3% true", "train mps_active_threads 100%->16.7% true",
				"pid 30 mps_active_threads 100%->33.3% true",
			},
		},
		{
			// A fraction not read is MPS's default, all the SMs: nothing
			// for best-effort to do (it restarted every client at every
			// retry, from a fraction unknown to 100%).
			name:   "best-effort leaves clients whose fraction is not read",
			policy: UncappedName,
			devs:   []gpu.Device{mpsDev(mpsProc(10, nil), mpsProc(11, nil))},
		},
		{
			name:    "mps already equal: nothing to do",
			policy:  StaticEqualName,
			devs:    []gpu.Device{mpsDev(mpsProc(10, gpu.Float(0.5)), mpsProc(11, gpu.Float(0.5)))},
			wantDec: nil,
		},
		{
			name:      "best-effort restores 100%",
			policy:    UncappedName,
			devs:      []gpu.Device{mpsDev(mpsProc(10, gpu.Float(0.5)), mpsProc(11, gpu.Float(1)))},
			wantCalls: []string{"SetMPSActiveThreads(GPU-a,10,1.0000)", "RestartClient(GPU-a,10)"},
			wantDec:   []string{"pid 10 mps_active_threads 50%->100% true"},
		},
		{
			name:   "mps restart refused as busy",
			policy: StaticEqualName,
			devs:   []gpu.Device{mpsDev(mpsProc(10, gpu.Float(1)), mpsProc(11, gpu.Float(0.5)))},
			errs:   map[string]error{"RestartClient": busy},
			// The executor sets the old fraction back: the new one must
			// not wait for a later restart of the client.
			wantCalls: []string{"SetMPSActiveThreads(GPU-a,10,0.5000)", "RestartClient(GPU-a,10)", "SetMPSActiveThreads(GPU-a,10,1.0000)"},
			wantDec:   []string{"pid 10 mps_active_threads 100%->50% false"},
		},
		{
			name:   "vgpu equal share refused while VMs run",
			policy: StaticEqualName,
			devs: []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU,
				Scheduler: &gpu.VGPUScheduler{Policy: "best-effort"}}},
			errs:      map[string]error{"SetVGPUScheduler": busy},
			wantCalls: []string{"SetVGPUScheduler(GPU-v,equal-share)"},
			wantDec:   []string{" vgpu_scheduler best-effort->equal-share false"},
		},
		{
			name:   "vgpu best effort already",
			policy: UncappedName,
			devs: []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU,
				Scheduler: &gpu.VGPUScheduler{Policy: "best-effort"}}},
		},
		{
			// the scheduler in force whole, as its original is kept
			name:   "vgpu best effort with adaptive round robin: turned off",
			policy: UncappedName,
			devs: []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU,
				Scheduler: &gpu.VGPUScheduler{Policy: "best-effort", ARREnabled: true, AvgFactor: 5, Frequency: 100, TimeSlice: 10 * time.Millisecond}}},
			wantCalls: []string{"SetVGPUScheduler(GPU-v,best-effort)"},
			wantDec:   []string{" vgpu_scheduler best-effort, ARR (average factor 5, 100 Hz)->best-effort true"},
		},
		{
			name:   "vgpu equal share, the time slice in force kept",
			policy: StaticEqualName,
			devs: []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU,
				Scheduler: &gpu.VGPUScheduler{Policy: "best-effort", TimeSlice: 5 * time.Millisecond}}},
			wantCalls: []string{"SetVGPUScheduler(GPU-v,equal-share)"},
			wantDec:   []string{" vgpu_scheduler best-effort, time slice 5ms->equal-share, time slice 5ms true"},
		},
		{
			name:   "vgpu equal share already, with a time slice of its own",
			policy: StaticEqualName,
			devs: []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU,
				Scheduler: &gpu.VGPUScheduler{Policy: "equal-share", TimeSlice: 5 * time.Millisecond, AvgFactor: 3}}},
		},
		{
			name:      "time slice back to default, not supported",
			policy:    UncappedName,
			devs:      []gpu.Device{{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: "long"}},
			errs:      map[string]error{"SetComputeTimeSlice": unsupported},
			wantCalls: []string{"SetComputeTimeSlice(GPU-t,default)"},
			wantDec:   []string{" compute_timeslice long->default false"},
		},
		{
			// NVML reads no time-slice level: a change from an unknown
			// level would journal an original no restore can set back
			// (and that the journal refuses, stopping every change).
			name:   "time slice not read: left alone",
			policy: StaticEqualName,
			devs:   []gpu.Device{{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice}},
		},
		{
			name:   "time slice not read: left alone by best-effort",
			policy: UncappedName,
			devs:   []gpu.Device{{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice}},
		},
		{
			// A scheduler not read this sample (the driver's getter
			// failed): as the time slice, a change from it would keep no
			// original, and nothing would set it back at exit.
			name:   "vgpu scheduler not read: left alone",
			policy: StaticEqualName,
			devs:   []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU}},
		},
		{
			name:   "vgpu scheduler not read: left alone by best-effort",
			policy: UncappedName,
			devs:   []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU}},
		},
		{
			name:   "mig, exclusive and down GPUs are left alone",
			policy: StaticEqualName,
			devs: []gpu.Device{
				{UUID: "GPU-m", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true},
				{UUID: "GPU-x", Up: true, Mode: gpu.SharingExclusive},
				{UUID: "GPU-d", Up: false, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(1, gpu.Float(1)), mpsProc(2, gpu.Float(1))}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := byName[tc.policy]()
			ctl := &fakeControl{Errs: tc.errs}
			decs, err := p.Observe(context.Background(), tuner.ActuatorsOf(ctl), snapshot(t0, tc.devs, tc.usage))
			if err != nil {
				t.Fatalf("Observe: %v", err)
			}
			if !reflect.DeepEqual(ctl.Calls, tc.wantCalls) {
				t.Errorf("calls:\n got %q\nwant %q", ctl.Calls, tc.wantCalls)
			}
			var got []string
			for _, d := range decs {
				got = append(got, fmt.Sprintf("%s %s %s->%s %v", d.Tenant, d.Knob, d.From, d.To, d.Applied))
				if !d.Time.Equal(t0) || d.Reason == "" {
					t.Errorf("decision %v: want time %v and a reason", d, t0)
				}
				if !d.Applied && !strings.Contains(d.Reason, "not applied") {
					t.Errorf("refused decision without the refusal in its reason: %q", d.Reason)
				}
			}
			if !reflect.DeepEqual(got, tc.wantDec) {
				t.Errorf("decisions:\n got %q\nwant %q", got, tc.wantDec)
			}
		})
	}
}

// A refused or pending change is not requested again on every tick: busy is
// retried after RetryAfter, not supported never.
func TestBaselineRetries(t *testing.T) {
	busy := fmt.Errorf("vms: %w", gpu.ErrBusy)
	vgpu := []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU, Scheduler: &gpu.VGPUScheduler{Policy: "best-effort"}}}
	ts := []gpu.Device{{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: "short"}}
	mps := []gpu.Device{{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(1, gpu.Float(1)), mpsProc(2, gpu.Float(1))}}}

	tests := []struct {
		name  string
		devs  []gpu.Device
		errs  map[string]error
		calls []int // cumulative call count after each tick at 0, 10s, RetryAfter+1s
	}{
		{"busy retried after RetryAfter", vgpu, map[string]error{"SetVGPUScheduler": busy}, []int{1, 1, 2}},
		{"not supported never retried", ts, map[string]error{"SetComputeTimeSlice": fmt.Errorf("x: %w", gpu.ErrNotSupported)}, []int{1, 1, 1}},
		{"other errors retried", ts, map[string]error{"SetComputeTimeSlice": fmt.Errorf("exit status 1")}, []int{1, 1, 2}},
		// Applied but the readings still show the old value (restart
		// pending): asked again only after RetryAfter.
		{"pending mps change not repeated", mps, nil, []int{4, 4, 8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewStaticEqual()
			ctl := &fakeControl{Errs: tc.errs}
			ctx := context.Background()
			if err := p.Init(ctx, tuner.ActuatorsOf(ctl), snapshot(t0, tc.devs, nil)); err != nil {
				t.Fatal(err)
			}
			got := []int{len(ctl.Calls)}
			for _, at := range []time.Duration{10 * time.Second, DefaultRetryAfter + time.Second} {
				decs, err := p.Observe(ctx, tuner.ActuatorsOf(ctl), snapshot(t0.Add(at), tc.devs, nil))
				if err != nil {
					t.Fatal(err)
				}
				// Waiting to ask again is no decision.
				for _, d := range decs {
					if at == 10*time.Second && !d.Time.Equal(t0) {
						t.Errorf("at %v: decision %v, want only Init's", at, d)
					}
				}
				got = append(got, len(ctl.Calls))
			}
			if !reflect.DeepEqual(got, tc.calls) {
				t.Errorf("cumulative calls %v, want %v (%q)", got, tc.calls, ctl.Calls)
			}
		})
	}
}

func TestObserveNilAndCancelled(t *testing.T) {
	p := NewUncapped()
	if d, err := p.Observe(context.Background(), tuner.ActuatorsOf(&fakeControl{}), nil); d != nil || err != nil {
		t.Errorf("nil snapshot: %v, %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Observe(ctx, tuner.ActuatorsOf(&fakeControl{}), snapshot(t0, nil, nil)); err == nil {
		t.Error("cancelled context: want an error")
	}
}

// Decisions made in Init are returned by the first Observe, once.
func TestInitDecisionsReported(t *testing.T) {
	devs := []gpu.Device{{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: "long"}}
	p := NewUncapped()
	ctl := &fakeControl{}
	ctx := context.Background()
	if err := p.Init(ctx, tuner.ActuatorsOf(ctl), snapshot(t0, devs, nil)); err != nil {
		t.Fatal(err)
	}
	devs[0].ComputeTimeSlice = "default"
	first, err := p.Observe(ctx, tuner.ActuatorsOf(ctl), snapshot(t0.Add(time.Second), devs, nil))
	if err != nil || len(first) != 1 || !first[0].Time.Equal(t0) || first[0].To != "default" {
		t.Fatalf("first Observe = %v, %v; want the Init decision at t0", first, err)
	}
	if again, _ := p.Observe(ctx, tuner.ActuatorsOf(ctl), snapshot(t0.Add(2*time.Second), devs, nil)); len(again) != 0 {
		t.Errorf("second Observe repeated decisions: %v", again)
	}
}

// A knob no backend of the host drives is not available on any GPU
// (tuner.State.Changeable): the baseline asks for no change of it, at the
// first round or later, and sets the knobs the host drives.
func TestBaselineWithoutActuators(t *testing.T) {
	devs := []gpu.Device{
		{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(1, gpu.Float(1)), mpsProc(2, gpu.Float(1))}},
		{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU, Scheduler: &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort}},
		{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: gpu.TimeSliceLong},
	}
	vo := &vgpuOnly{}
	p := NewStaticEqual()
	ctx := context.Background()
	decs, err := p.Observe(ctx, tuner.ActuatorsOf(vo), snapshot(t0, devs, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range decs {
		got = append(got, fmt.Sprintf("%s %s %v", d.GPU, d.Knob, d.Applied))
	}
	want := "[GPU-v vgpu_scheduler true]"
	if fmt.Sprint(got) != want {
		t.Errorf("decisions %v, want %s", got, want)
	}
	again, err := p.Observe(ctx, tuner.ActuatorsOf(vo), snapshot(t0.Add(2*DefaultRetryAfter), devs, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range again {
		if d.Knob != gpu.KnobVGPUScheduler {
			t.Errorf("asked for without an actuator: %v", d)
		}
	}
}

// A knob the GPU's backends list out (State.Knobs) is left alone there, on
// that GPU only; a setting whose original the tuner keeps is still set.
func TestBaselineUnavailableKnobs(t *testing.T) {
	devs := []gpu.Device{
		{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(1, gpu.Float(1)), mpsProc(2, gpu.Float(1))}},
		{UUID: "GPU-b", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(3, gpu.Float(1)), mpsProc(4, gpu.Float(1))}},
		{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU, Scheduler: &gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort}},
		{UUID: "GPU-t", Up: true, Mode: gpu.SharingTimeSlice, ComputeTimeSlice: gpu.TimeSliceLong},
	}
	off := func(k gpu.Knob) []tuner.KnobAvailability { return []tuner.KnobAvailability{{Knob: k, Driven: true}} }
	s := &tuner.State{Now: t0, Snapshot: snapshot(t0, devs, nil), Originals: map[string]tuner.Value{
		tuner.Target{GPU: "GPU-b", Knob: gpu.KnobMPSActiveThreads, PID: 4}.String(): tuner.Fraction(1),
	}, Knobs: map[string][]tuner.KnobAvailability{
		"GPU-a": off(gpu.KnobMPSActiveThreads), "GPU-b": off(gpu.KnobMPSActiveThreads),
		"GPU-v": off(gpu.KnobVGPUScheduler), "GPU-t": off(gpu.KnobComputeTimeSlice),
	}}
	var got []string
	for _, a := range (Baseline{name: StaticEqualName, equal: true}).Decide(s) {
		got = append(got, a.Target.String()+"="+a.Want.String())
	}
	if want := []string{"GPU-b/mps_active_threads/pid4=50%"}; !reflect.DeepEqual(got, want) {
		t.Errorf("actions %v, want %v", got, want)
	}
}

// wholePercent holds a fraction as the MPS controller does: a whole
// percentage, at most the server's value.
type wholePercent struct{ server float64 }

func (w wholePercent) HeldFraction(_ string, _ uint32, f float64) float64 {
	return math.Min(math.Round(f*100)/100, w.server)
}

// A client already at the fraction the MPS actuator holds for the
// baseline's target (State.MPSHeld) is left alone: 1/8 in force as 13%, or
// 1/2 as its server's 30%, was asked again, restarting the client, at
// every retry.
func TestBaselineMPSHeld(t *testing.T) {
	clients := func(n int, at float64) []gpu.Process {
		var ps []gpu.Process
		for pid := range n {
			ps = append(ps, mpsProc(uint32(pid+1), gpu.Float(at)))
		}
		return ps
	}
	tests := []struct {
		name   string
		policy string
		server float64
		procs  []gpu.Process
		want   []string
	}{
		{"8 tenants held at 13%", StaticEqualName, 1, clients(8, 0.13), nil},
		{"2 tenants held at the server's 30%", StaticEqualName, 0.3, clients(2, 0.3), nil},
		{"best-effort held at the server's 30%", UncappedName, 0.3, clients(1, 0.3), nil},
		{"2 tenants at 100% under a server at 30%", StaticEqualName, 0.3, clients(2, 1),
			[]string{"GPU-a/mps_active_threads/pid1=50%", "GPU-a/mps_active_threads/pid2=50%"}},
		{"2 tenants held at 13%: not 50%", StaticEqualName, 1, clients(2, 0.13),
			[]string{"GPU-a/mps_active_threads/pid1=50%", "GPU-a/mps_active_threads/pid2=50%"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			devs := []gpu.Device{{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: tc.procs}}
			s := &tuner.State{Now: t0, Snapshot: snapshot(t0, devs, nil), MPSResolver: wholePercent{tc.server}}
			var got []string
			for _, a := range (Baseline{name: tc.policy, equal: tc.policy == StaticEqualName}).Decide(s) {
				got = append(got, a.Target.String()+"="+a.Want.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("actions %v, want %v", got, tc.want)
			}
		})
	}
}

// restartFails1 fails every restart of PID 1's client.
type restartFails1 struct{ *fakeControl }

func (f restartFails1) RestartClient(ctx context.Context, uuid string, pid uint32, tn string) error {
	err := f.fakeControl.RestartClient(ctx, uuid, pid, tn)
	if pid == 1 {
		return errors.New("restart hook exited 1")
	}
	return err
}

// static-equal on an MPS GPU of three tenants, one of whose client
// restarts always fails (PID 1, first by PID), caps the other two within
// its first two minutes (before, they were refused behind the failing one
// at every retry, never capped).
func TestStaticEqualCapsPastABrokenClient(t *testing.T) {
	devs := []gpu.Device{{UUID: "GPU-a", Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(1, gpu.Float(1)), mpsProc(2, gpu.Float(1)), mpsProc(3, gpu.Float(1))}}}
	usage := []tenant.Usage{
		{Tenant: "etl", UUID: "GPU-a", PIDs: []uint32{1}},
		{Tenant: "chat", UUID: "GPU-a", PIDs: []uint32{2}},
		{Tenant: "train", UUID: "GPU-a", PIDs: []uint32{3}},
	}
	ctl := &fakeControl{}
	act := tuner.ActuatorsOf(restartFails1{ctl})
	p := NewStaticEqual()
	ctx := context.Background()
	if err := p.Init(ctx, act, snapshot(t0, devs, usage)); err != nil {
		t.Fatal(err)
	}
	for at := 10 * time.Second; at <= 2*time.Minute; at += 10 * time.Second {
		if _, err := p.Observe(ctx, act, snapshot(t0.Add(at), devs, usage)); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range []string{"2", "3"} {
		if !slices.ContainsFunc(ctl.Calls, func(c string) bool { return strings.HasPrefix(c, "SetMPSActiveThreads(GPU-a,"+pid+",") }) {
			t.Errorf("PID %s never capped in 2 minutes behind etl's failing restart: calls %q", pid, ctl.Calls)
		}
	}
}

// schedHost records every vGPU scheduler setting whole.
type schedHost struct{ calls []string }

func (h *schedHost) SetVGPUScheduler(_ context.Context, uuid string, s gpu.VGPUSchedulerSetting) error {
	h.calls = append(h.calls, fmt.Sprintf("%s %+v", uuid, s))
	return nil
}

// The exit sets the vGPU scheduler a baseline changed back whole: an
// operator's best-effort with adaptive round robin (average factor 5,
// 100 Hz), which the best-effort baseline turns off, gets its ARR back;
// an operator's time slice is kept by the static-equal baseline's change
// and set back with the policy. Before, the original was the policy
// alone: best-effort to best-effort, the exit found it "already at its
// original value" and left ARR off.
func TestBaselineSchedulerSetBackWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Baseline
		before gpu.VGPUScheduler // the operator's
		after  gpu.VGPUScheduler // the baseline's
		set    gpu.VGPUSchedulerSetting
		exit   gpu.VGPUSchedulerSetting
	}{
		{"best-effort turns ARR off", Baseline{name: UncappedName},
			gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort, ARREnabled: true, AvgFactor: 5, Frequency: 100, TimeSlice: 10 * time.Millisecond},
			gpu.VGPUScheduler{Policy: gpu.VGPUPolicyBestEffort, TimeSlice: 2 * time.Millisecond},
			gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyBestEffort},
			gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyBestEffort, ARREnabled: true, AvgFactor: 5, Frequency: 100}},
		{"static-equal keeps a time slice", Baseline{name: StaticEqualName, equal: true},
			gpu.VGPUScheduler{Policy: gpu.VGPUPolicyFixedShare, TimeSlice: 5 * time.Millisecond},
			gpu.VGPUScheduler{Policy: gpu.VGPUPolicyEqualShare, TimeSlice: 5 * time.Millisecond},
			gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyEqualShare, TimeSlice: 5 * time.Millisecond},
			gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyFixedShare, TimeSlice: 5 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := tuner.OpenJournal(filepath.Join(t.TempDir(), "journal"))
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			host := &schedHost{}
			clk := gpu.NewManualClock(t0)
			tu, err := tuner.New(tuner.Options{Policy: tc.policy, Actuators: tuner.ActuatorsOf(host), Journal: j, Clock: clk, Mode: tuner.ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			reads := func(s gpu.VGPUScheduler) *tenant.Snapshot {
				return snapshot(clk.Now(), []gpu.Device{{UUID: "GPU-v", Up: true, Mode: gpu.SharingVGPU, Scheduler: &s}}, nil)
			}
			ctx := context.Background()
			if _, err := tu.RunOnce(ctx, reads(tc.before)); err != nil {
				t.Fatal(err)
			}
			if want := []string{fmt.Sprintf("GPU-v %+v", tc.set)}; !slices.Equal(host.calls, want) {
				t.Errorf("calls %q, want %q", host.calls, want)
			}
			clk.Advance(time.Minute)
			if _, err := tu.RunOnce(ctx, reads(tc.after)); err != nil {
				t.Fatal(err)
			}
			host.calls = nil
			if _, err := tu.Restore(ctx); err != nil {
				t.Fatal(err)
			}
			if want := []string{fmt.Sprintf("GPU-v %+v", tc.exit)}; !slices.Equal(host.calls, want) {
				t.Errorf("calls at exit %q, want %q: the operator's scheduler not set back whole", host.calls, want)
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d originals open after the exit", n)
			}
		})
	}
}
