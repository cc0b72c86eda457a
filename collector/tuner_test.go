package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// richTunerStatus has every field of the tuner's status set.
func richTunerStatus() *tuner.Status {
	acts := map[tuner.ActionKey]uint64{}
	for _, k := range tuner.CountedKnobs {
		for _, o := range tuner.CountedOutcomes {
			acts[tuner.ActionKey{Knob: k, Outcome: o}] = 0
		}
	}
	acts[tuner.ActionKey{Knob: gpu.KnobMPSActiveThreads, Outcome: tuner.OutcomeFailed}] = 1
	acts[tuner.ActionKey{Knob: gpu.KnobMPSActiveThreads, Outcome: tuner.OutcomeRolledBack}] = 1
	ref := map[string]uint64{}
	for _, g := range tuner.GuardNames {
		ref[g] = 0
	}
	ref[tuner.GuardBackoff] = 2
	const u = "GPU-0"
	return &tuner.Status{
		Policy: "autotune", Mode: tuner.ModeEnforce, KillSwitch: true, LastRun: time.Unix(1700000000, 0), Interval: tuner.DefaultInterval, Unrestored: 2,
		// GPU 1 is held in recommend by its own mode.
		GPUModes: map[string]tuner.Mode{"GPU-1": tuner.ModeRecommend},
		GPUs: []tuner.GPURound{
			{GPU: u, GPUIndex: 0, Mode: tuner.ModeEnforce, Kind: tuner.RoundActing,
				Knobs: []tuner.KnobAvailability{{Knob: gpu.KnobPowerLimit, Driven: true, Available: true}, {Knob: gpu.KnobVGPUScheduler, Driven: true}}},
			{GPU: "GPU-1", GPUIndex: 1, Mode: tuner.ModeRecommend},
		},
		Settings: []tuner.Setting{
			{GPU: u, Tenant: "embed", Knob: gpu.KnobMPSActiveThreads, PID: 2, Target: tuner.Fraction(0.2), Effective: tuner.Fraction(0.25)},
			{GPU: u, Tenant: "embed", Knob: gpu.KnobMPSActiveThreads, PID: 3, Target: tuner.Fraction(0.2), Effective: tuner.Fraction(0.25)},
			{GPU: u, Knob: gpu.KnobPowerLimit, Target: tuner.Watts(490)},
			{GPU: u, Knob: gpu.KnobLockedClocks, Target: tuner.ClockRange{MinMHz: 1980, MaxMHz: 1980}},
			{GPU: u, Knob: gpu.KnobComputeTimeSlice, Target: tuner.Level("short")},
			{GPU: u, Knob: gpu.KnobVGPUScheduler, Target: tuner.Scheduler{Policy: "equal-share"}},
			{GPU: u, Tenant: "train", Knob: gpu.KnobPauseDuty, PID: 4, Target: tuner.Duty(0.4), Effective: tuner.Duty(0)},
			{GPU: u, Tenant: "etl", Knob: gpu.KnobPauseDuty, PID: 5, Target: tuner.Duty(0.2)},
		},
		Counts:    tuner.Counts{Actions: acts, Refusals: ref, Reverts: 1, Restores: 3, RestoreFailures: 1, JournalErrors: 1},
		Actuators: []tuner.ActuatorInfo{{Knob: gpu.KnobMPSActiveThreads, Backend: "mps"}, {Knob: gpu.KnobPowerLimit, Backend: "nvml"}},
		Journal:   &tuner.JournalStats{Dropped: map[string]int{"torn": 1}, Compactions: 2, WriteError: "no space left on device", Size: 420},
		// the freezes failed: train ran through 7 of its periods
		PauseFreezeFailures: map[string]uint64{"train": 7},
		PausePeriod:         500 * time.Millisecond,
	}
}

func TestTunerCollector(t *testing.T) {
	want := `
# HELP vgpu_tuner_mps_active_threads_effective_ratio MPS active-thread fraction in effect for the tenant's clients on the GPU (sum over the contexts as created).
# TYPE vgpu_tuner_mps_active_threads_effective_ratio gauge
vgpu_tuner_mps_active_threads_effective_ratio{gpu="0",tenant="embed",uuid="GPU-0"} 0.5
# HELP vgpu_tuner_mps_active_threads_target_ratio MPS active-thread fraction the tuner last decided for the tenant's clients on the GPU (sum over its clients).
# TYPE vgpu_tuner_mps_active_threads_target_ratio gauge
vgpu_tuner_mps_active_threads_target_ratio{gpu="0",tenant="embed",uuid="GPU-0"} 0.4
# HELP vgpu_tuner_pause_duty_target_ratio Fraction of every period the tuner's target pauses the tenant's processes for (pause_duty): the duty last set, or recommended in recommend mode; 0 once thawed; gone once the tenant has run on no GPU for a minute since.
# TYPE vgpu_tuner_pause_duty_target_ratio gauge
vgpu_tuner_pause_duty_target_ratio{gpu="0",tenant="etl",uuid="GPU-0"} 0.2
vgpu_tuner_pause_duty_target_ratio{gpu="0",tenant="train",uuid="GPU-0"} 0.4
# HELP vgpu_tuner_pause_duty_effective_ratio Fraction of every period the tenant's processes are paused for now, as the pause actuator runs it: the largest duty any of the tenant's GPUs asks for, the longest pause capped (--pause.max); 0 where the latest period's freeze failed or the tenant is not paused.
# TYPE vgpu_tuner_pause_duty_effective_ratio gauge
vgpu_tuner_pause_duty_effective_ratio{gpu="0",tenant="train",uuid="GPU-0"} 0
# HELP vgpu_tuner_pause_freeze_failures_total Pause periods whose freeze failed, by tenant: each thawed once its freeze did not settle, the tenant not paused as targeted.
# TYPE vgpu_tuner_pause_freeze_failures_total counter
vgpu_tuner_pause_freeze_failures_total{tenant="train"} 7
# HELP vgpu_tuner_mode 1 for the tuner's host-wide mode (off, recommend, enforce), 0 for the others.
# TYPE vgpu_tuner_mode gauge
vgpu_tuner_mode{mode="enforce"} 1
vgpu_tuner_mode{mode="off"} 0
vgpu_tuner_mode{mode="recommend"} 0
# HELP vgpu_tuner_gpu_mode 1 for the mode the tuner applies to the GPU (off, recommend, enforce: the host-wide mode or the GPU's own), 0 for the others; for each GPU of the latest round.
# TYPE vgpu_tuner_gpu_mode gauge
vgpu_tuner_gpu_mode{gpu="0",mode="enforce",uuid="GPU-0"} 1
vgpu_tuner_gpu_mode{gpu="0",mode="off",uuid="GPU-0"} 0
vgpu_tuner_gpu_mode{gpu="0",mode="recommend",uuid="GPU-0"} 0
vgpu_tuner_gpu_mode{gpu="1",mode="enforce",uuid="GPU-1"} 0
vgpu_tuner_gpu_mode{gpu="1",mode="off",uuid="GPU-1"} 0
vgpu_tuner_gpu_mode{gpu="1",mode="recommend",uuid="GPU-1"} 1
# HELP vgpu_tuner_restore_failures_total Original settings that could not be restored.
# TYPE vgpu_tuner_restore_failures_total counter
vgpu_tuner_restore_failures_total 1
# HELP vgpu_tuner_locked_clock_target_hertz Upper end of the SM clock lock the tuner last decided for the GPU; 0 for unlocked. The range in force is not read back (NVML has no call that returns it): vgpu_gpu_clocks_locked says whether the clocks are locked.
# TYPE vgpu_tuner_locked_clock_target_hertz gauge
vgpu_tuner_locked_clock_target_hertz{gpu="0",uuid="GPU-0"} 1.98e+09
# HELP vgpu_tuner_actuator_info The backend that drives a knob on this host (nvml, sim, mps, nvidia-smi, rebalance-hook, pause), as detected at start; always 1. A knob without a series has no actuator here: its changes are refused as not supported (in recommend mode, recommended).
# TYPE vgpu_tuner_actuator_info gauge
vgpu_tuner_actuator_info{backend="mps",knob="mps_active_threads"} 1
vgpu_tuner_actuator_info{backend="nvml",knob="power_limit"} 1
# HELP vgpu_tuner_journal_writable 1 while the tuner journal can be written: its last write succeeded or, after a failed one, a probe since did (each round probes it while its last write failed); 0 while it cannot, when the tuner makes no change (restores go on).
# TYPE vgpu_tuner_journal_writable gauge
vgpu_tuner_journal_writable 0
# HELP vgpu_tuner_journal_records_dropped_total Journal records dropped when the journal was read (at open, or one put at its path while in use), by reason: torn (the tail a crash or a full disk left), corrupt, invalid, oversize.
# TYPE vgpu_tuner_journal_records_dropped_total counter
vgpu_tuner_journal_records_dropped_total{reason="corrupt"} 0
vgpu_tuner_journal_records_dropped_total{reason="invalid"} 0
vgpu_tuner_journal_records_dropped_total{reason="oversize"} 0
vgpu_tuner_journal_records_dropped_total{reason="torn"} 1
`
	c := NewTunerCollector(richTunerStatus)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"vgpu_tuner_mps_active_threads_effective_ratio", "vgpu_tuner_mps_active_threads_target_ratio", "vgpu_tuner_mode", "vgpu_tuner_gpu_mode",
		"vgpu_tuner_restore_failures_total", "vgpu_tuner_locked_clock_target_hertz", "vgpu_tuner_actuator_info",
		"vgpu_tuner_pause_duty_target_ratio", "vgpu_tuner_pause_duty_effective_ratio", "vgpu_tuner_pause_freeze_failures_total", "vgpu_tuner_journal_writable", "vgpu_tuner_journal_records_dropped_total"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "vgpu_tuner_actions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["knob"] == "mps_active_threads" && l["outcome"] == "failed" {
				found = m.GetCounter().GetValue() == 1
			}
		}
	}
	if !found {
		t.Error("vgpu_tuner_actions_total{knob=\"mps_active_threads\",outcome=\"failed\"} 1 not served")
	}
	if n := testutil.CollectAndCount(NewTunerCollector(func() *tuner.Status { return nil })); n != 0 {
		t.Errorf("no status: %d metrics", n)
	}
}

// clockBackend drives clocks and power and lists the power limit alone,
// on GPU-0 alone.
type clockBackend struct{}

func (clockBackend) LockClocks(context.Context, string, gpu.ClockLock) error { return nil }
func (clockBackend) SetPowerLimit(context.Context, string, float64) error    { return nil }
func (clockBackend) Capabilities(uuid string) []gpu.Knob {
	if uuid == "GPU-0" {
		return []gpu.Knob{gpu.KnobPowerLimit}
	}
	return nil
}

// idle is a policy that decides nothing.
type idle struct{}

func (idle) Name() string                       { return "idle" }
func (idle) Decide(*tuner.State) []tuner.Action { return nil }

// vgpu_tuner_knob_available says, for each GPU of the tuner's latest round
// and each knob, whether the host's backends can turn it there (GPU-1,
// for which the backend lists nothing, as unknown: 1 where it drives the
// knob).
func TestTunerKnobAvailable(t *testing.T) {
	clk := gpu.NewManualClock(time.Unix(1700000000, 0))
	tu, err := tuner.New(tuner.Options{Policy: idle{}, Actuators: tuner.ActuatorsOf(clockBackend{}), Clock: clk, Mode: tuner.ModeRecommend})
	if err != nil {
		t.Fatal(err)
	}
	snap := &tenant.Snapshot{Time: clk.Now(), Readings: &gpu.Readings{Time: clk.Now(), Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice}, {Index: 1, UUID: "GPU-1", Up: true, Mode: gpu.SharingTimeSlice}}}}
	if _, err := tu.RunOnce(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP vgpu_tuner_knob_available 1 where the host's backends can turn the knob on the GPU, 0 where no backend drives it, every one lists its knobs and leaves it out there, or every one withholds it there (an MPS client's cap without --mps.restart-hook) (the tuner then refuses its changes untried); for each GPU of the latest round and each knob.
# TYPE vgpu_tuner_knob_available gauge
vgpu_tuner_knob_available{gpu="0",knob="compute_timeslice",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="0",knob="locked_clocks",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="0",knob="mig_layout",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="0",knob="mps_active_threads",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="0",knob="pause_duty",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="0",knob="placement",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="0",knob="power_limit",uuid="GPU-0"} 1
vgpu_tuner_knob_available{gpu="0",knob="vgpu_scheduler",uuid="GPU-0"} 0
vgpu_tuner_knob_available{gpu="1",knob="compute_timeslice",uuid="GPU-1"} 0
vgpu_tuner_knob_available{gpu="1",knob="locked_clocks",uuid="GPU-1"} 1
vgpu_tuner_knob_available{gpu="1",knob="mig_layout",uuid="GPU-1"} 0
vgpu_tuner_knob_available{gpu="1",knob="mps_active_threads",uuid="GPU-1"} 0
vgpu_tuner_knob_available{gpu="1",knob="pause_duty",uuid="GPU-1"} 0
vgpu_tuner_knob_available{gpu="1",knob="placement",uuid="GPU-1"} 0
vgpu_tuner_knob_available{gpu="1",knob="power_limit",uuid="GPU-1"} 1
vgpu_tuner_knob_available{gpu="1",knob="vgpu_scheduler",uuid="GPU-1"} 0
`
	if err := testutil.CollectAndCompare(NewTunerCollector(tu.Status), strings.NewReader(want), "vgpu_tuner_knob_available"); err != nil {
		t.Error(err)
	}
}

// vgpu_tuner_interval_seconds is the interval the runner runs the rounds
// at (--tuner.interval), so that an alert on the age of the latest round
// (vgpu_tuner_last_run_timestamp_seconds) measures it against the host's
// own interval: a healthy tuner at 10 minutes is not a stalled one. A
// tuner no runner runs on a clock (a policy run offline) serves none.
func TestTunerInterval(t *testing.T) {
	const help = `
# HELP vgpu_tuner_interval_seconds The time from the start of one round of the tuner to the next's (--tuner.interval); a round that takes longer is followed at the next whole interval from its start.
# TYPE vgpu_tuner_interval_seconds gauge
`
	clk := gpu.NewManualClock(time.Unix(1700000000, 0))
	tu, err := tuner.New(tuner.Options{Policy: idle{}, Clock: clk, Mode: tuner.ModeRecommend})
	if err != nil {
		t.Fatal(err)
	}
	runner := func(every time.Duration) func() *tuner.Status {
		return tuner.NewRunner(tu, nil, clk, every, func() *tenant.Snapshot { return nil }, nil).Status
	}
	for _, c := range []struct {
		name   string
		status func() *tuner.Status
		want   string
	}{
		{"the default", runner(tuner.DefaultInterval), help + "vgpu_tuner_interval_seconds 15\n"},
		{"ten minutes", runner(10 * time.Minute), help + "vgpu_tuner_interval_seconds 600\n"},
		{"a second and a half", runner(1500 * time.Millisecond), help + "vgpu_tuner_interval_seconds 1.5\n"},
		{"no runner", tu.Status, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := testutil.CollectAndCompare(NewTunerCollector(c.status), strings.NewReader(c.want), "vgpu_tuner_interval_seconds"); err != nil {
				t.Error(err)
			}
		})
	}
	// the runner's copy leaves the status the tuner published as it was
	if runner(time.Minute)(); tu.Status().Interval != 0 {
		t.Errorf("the tuner's own status has interval %s, want none", tu.Status().Interval)
	}
}

// vgpu_tuner_pause_period_seconds is the pause actuator's pulse period
// (--pause.period), so that an alert on vgpu_tuner_pause_freeze_failures_total
// (at most one a period) reads it as the fraction of the periods that
// failed, whatever the period. None where no actuator reports it.
func TestTunerPausePeriod(t *testing.T) {
	const help = `
# HELP vgpu_tuner_pause_period_seconds The period of a paused tenant's pulse (--pause.period): paused for the duty of each, running for the rest; a period's failed freeze counts once in vgpu_tuner_pause_freeze_failures_total. Served where the pause actuator reports its failures.
# TYPE vgpu_tuner_pause_period_seconds gauge
`
	for _, c := range []struct {
		name   string
		period time.Duration
		want   string
	}{
		{"the default", 500 * time.Millisecond, help + "vgpu_tuner_pause_period_seconds 0.5\n"},
		{"fifteen seconds", 15 * time.Second, help + "vgpu_tuner_pause_period_seconds 15\n"},
		{"no pause reporter", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &tuner.Status{Policy: "autotune", PausePeriod: c.period}
			if err := testutil.CollectAndCompare(NewTunerCollector(func() *tuner.Status { return st }), strings.NewReader(c.want), "vgpu_tuner_pause_period_seconds"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestTunerHookGauges checks the values of the hook gauges: how many
// hooks run, and the oldest one's age at the latest round (never below 0,
// and 0 before any round).
func TestTunerHookGauges(t *testing.T) {
	last := time.Unix(1700000000, 0)
	run := func(ago time.Duration) tuner.HookRun {
		return tuner.HookRun{GPU: "GPU-0", Tenant: "train", Knob: gpu.KnobMPSActiveThreads, PID: 7, From: "100%", To: "50%", Since: last.Add(-ago)}
	}
	for _, tc := range []struct {
		name            string
		lastRun         time.Time
		hooks           []tuner.HookRun
		running, oldest string
	}{
		{"none", last, nil, "0", "0"},
		{"one", last, []tuner.HookRun{run(90 * time.Second)}, "1", "90"},
		// the status lists them oldest first: the gauge is the first one's age
		{"two", last, []tuner.HookRun{run(125 * time.Second), run(10 * time.Second)}, "2", "125"},
		// a hook whose start the clock puts after the round (a clock set back)
		{"started after the round", last, []tuner.HookRun{run(-5 * time.Second)}, "1", "0"},
		{"no round yet", time.Time{}, []tuner.HookRun{run(30 * time.Second)}, "1", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &tuner.Status{Policy: "autotune", Mode: tuner.ModeEnforce, LastRun: tc.lastRun, Hooks: tc.hooks}
			want := `# HELP vgpu_tuner_hooks_running Actuator calls that run a hook (an MPS client's restart, a rebalancing plan) which the tuner started off its round and has not settled yet, at its latest round.
# TYPE vgpu_tuner_hooks_running gauge
vgpu_tuner_hooks_running ` + tc.running + `
# HELP vgpu_tuner_hook_oldest_running_seconds How long the oldest of those calls had run at the tuner's latest round; 0 when none runs.
# TYPE vgpu_tuner_hook_oldest_running_seconds gauge
vgpu_tuner_hook_oldest_running_seconds ` + tc.oldest + `
`
			c := NewTunerCollector(func() *tuner.Status { return s })
			if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vgpu_tuner_hooks_running", "vgpu_tuner_hook_oldest_running_seconds"); err != nil {
				t.Error(err)
			}
		})
	}
}

// vgpu_tuner_restores_total's help does not say every restore at start
// follows an unclean exit: a clean exit keeps open what it leaves on a GPU
// out of enforce mode, which the next start restores.
func TestTunerRestoresHelp(t *testing.T) {
	s := &tuner.Status{Policy: "autotune", Mode: tuner.ModeEnforce, Counts: tuner.Counts{Restores: 2}}
	want := `# HELP vgpu_tuner_restores_total Original settings restored (at exit, or at start: what an earlier run left open in the journal) and paused tenants thawed.
# TYPE vgpu_tuner_restores_total counter
vgpu_tuner_restores_total 2
`
	if err := testutil.CollectAndCompare(NewTunerCollector(func() *tuner.Status { return s }), strings.NewReader(want), "vgpu_tuner_restores_total"); err != nil {
		t.Error(err)
	}
}

// vgpu_tuner_mps_active_threads_effective_ratio sums the tenant's clients'
// fractions in effect, and is absent while any of them is not known: a
// partial sum (or an unknown client counted as -1) is no value in effect.
func TestTunerMPSEffectiveSum(t *testing.T) {
	mps := func(pid uint32, target float64, eff tuner.Value) tuner.Setting {
		return tuner.Setting{GPU: "GPU-0", Tenant: "batch", Knob: gpu.KnobMPSActiveThreads, PID: pid, Mode: tuner.ModeEnforce,
			Target: tuner.Fraction(target), Effective: eff}
	}
	const head = `# HELP vgpu_tuner_mps_active_threads_effective_ratio MPS active-thread fraction in effect for the tenant's clients on the GPU (sum over the contexts as created).
# TYPE vgpu_tuner_mps_active_threads_effective_ratio gauge
`
	for _, tc := range []struct {
		name     string
		settings []tuner.Setting
		want     string // the gauge's value; "" for no series
	}{
		{"both known", []tuner.Setting{mps(7, 0.25, tuner.Fraction(0.5)), mps(8, 0.25, tuner.Fraction(0.5))}, "1"},
		{"first unknown", []tuner.Setting{mps(7, 0.25, nil), mps(8, 0.25, tuner.Fraction(1))}, ""},
		{"second unknown", []tuner.Setting{mps(7, 0.25, tuner.Fraction(0.5)), mps(8, 0.25, nil)}, ""},
		{"none known", []tuner.Setting{mps(7, 0.25, nil), mps(8, 0.25, nil)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &tuner.Status{Policy: "autotune", Mode: tuner.ModeEnforce, Settings: tc.settings}
			want := ""
			if tc.want != "" {
				want = head + `vgpu_tuner_mps_active_threads_effective_ratio{gpu="0",tenant="batch",uuid="GPU-0"} ` + tc.want + "\n"
			}
			c := NewTunerCollector(func() *tuner.Status { return s })
			if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vgpu_tuner_mps_active_threads_effective_ratio"); err != nil {
				t.Error(err)
			}
		})
	}
}

// The node lock held or not, from the tuner's status: which of two
// installs on a node tunes shows in Prometheus, not only in a log line.
func TestTunerNodeLockHeld(t *testing.T) {
	const help = `
# HELP vgpu_tuner_node_lock_held 1 while this exporter's tuner holds the node lock (--tuner.node-lock: one tuner in enforce per node; a second exits at start, naming the holder), 0 where it takes none (no GPU in enforce mode, an empty --tuner.node-lock, the simulator without the flag).
# TYPE vgpu_tuner_node_lock_held gauge
`
	for _, c := range []struct {
		name string
		lock tuner.NodeLockState
		want string
	}{
		{"held", tuner.NodeLockState{Path: "/run/vgpu-exporter/tuner.lock"}, "vgpu_tuner_node_lock_held 1\n"},
		{"recommend", tuner.NodeLockState{NotTaken: tuner.NodeLockNotEnforcing}, "vgpu_tuner_node_lock_held 0\n"},
		{"no lock file", tuner.NodeLockState{NotTaken: tuner.NodeLockNoFile}, "vgpu_tuner_node_lock_held 0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &tuner.Status{Mode: tuner.ModeEnforce, NodeLock: c.lock}
			if err := testutil.CollectAndCompare(NewTunerCollector(func() *tuner.Status { return s }), strings.NewReader(help+c.want), "vgpu_tuner_node_lock_held"); err != nil {
				t.Error(err)
			}
		})
	}
}

// A target served is what the tuner set on a GPU in enforce mode, and
// what it recommends on one in recommend mode: a value only recommended
// on a GPU in enforce mode (nothing could set it: the journal unwritable)
// serves no target, which would read as in force there.
func TestTunerTargetOnlySetInEnforce(t *testing.T) {
	const head = `# HELP vgpu_tuner_power_limit_target_watts Power limit the tuner targets for the GPU; once set, the limit the GPU holds as read back where that differs.
# TYPE vgpu_tuner_power_limit_target_watts gauge
`
	power := func(m tuner.Mode) tuner.Setting {
		return tuner.Setting{GPU: "GPU-0", Knob: gpu.KnobPowerLimit, Mode: m, Target: tuner.Watts(490)}
	}
	const served = head + `vgpu_tuner_power_limit_target_watts{gpu="0",uuid="GPU-0"} 490` + "\n"
	for _, tc := range []struct {
		name    string
		gpuMode tuner.Mode // the GPU's, the host's enforce
		setting tuner.Setting
		want    string
	}{
		{"set in enforce", tuner.ModeEnforce, power(tuner.ModeEnforce), served},
		{"recommended only in enforce", tuner.ModeEnforce, power(tuner.ModeRecommend), ""},
		{"recommended in recommend", tuner.ModeRecommend, power(tuner.ModeRecommend), served},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &tuner.Status{Policy: "autotune", Mode: tuner.ModeEnforce, GPUModes: map[string]tuner.Mode{"GPU-0": tc.gpuMode},
				Settings: []tuner.Setting{tc.setting}}
			c := NewTunerCollector(func() *tuner.Status { return s })
			if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want), "vgpu_tuner_power_limit_target_watts"); err != nil {
				t.Error(err)
			}
		})
	}
}

// vgpu_tuner_pause_thaws_pending counts the pauses an earlier run left
// whose thaw failed at start and is tried again at every round (the
// status's Exit.ThawPending, /tuner's settings_thaw_pending): a tenant
// left frozen, which an alert sees. It is served 0 with none, so that its
// series is there before the first. (Before, no series showed them.)
func TestTunerPauseThawsPending(t *testing.T) {
	const help = `
# HELP vgpu_tuner_pause_thaws_pending Pauses an earlier run left whose thaw failed at start, tried again at every round (and at exit): tenants that may be left frozen.
# TYPE vgpu_tuner_pause_thaws_pending gauge
`
	for _, c := range []struct {
		name string
		exit tuner.ExitRestores
		want string
	}{
		{"none", tuner.ExitRestores{}, "vgpu_tuner_pause_thaws_pending 0\n"},
		{"one", tuner.ExitRestores{ThawPending: 1}, "vgpu_tuner_pause_thaws_pending 1\n"},
		// the other originals open are not thaws pending
		{"two beside others", tuner.ExitRestores{AtExit: 3, Failed: 1, KeptOpen: 2, WaitingForListing: 1, ThawPending: 2}, "vgpu_tuner_pause_thaws_pending 2\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &tuner.Status{Mode: tuner.ModeEnforce, Exit: c.exit}
			if err := testutil.CollectAndCompare(NewTunerCollector(func() *tuner.Status { return s }), strings.NewReader(help+c.want), "vgpu_tuner_pause_thaws_pending"); err != nil {
				t.Error(err)
			}
		})
	}
}
