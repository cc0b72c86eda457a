package collector

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// TunerCollector renders the tuner's published status. Like the snapshot
// collectors it only reads an immutable value (tuner.Status, behind an
// atomic pointer): a scrape never waits on the tuner or its actuators.
type TunerCollector struct {
	status func() *tuner.Status
	descSet
	info, mode, gpuMode, killSwitch, lastRun, unrestored      *prometheus.Desc
	interval                                                  *prometheus.Desc
	actuator, knobAvailable                                   *prometheus.Desc
	mpsTarget, mpsEffective, powerTarget, clockTarget         *prometheus.Desc
	timeSliceTarget, schedulerTarget, pauseTarget             *prometheus.Desc
	pauseEffective, pauseFailures, pauseThaws, pausePeriod    *prometheus.Desc
	actions, refusals, reverts, restores, restoreFailures, jw *prometheus.Desc
	jWritable, jDropped, jCompactions, jSize                  *prometheus.Desc
	hooksRunning, hookOldest, nodeLock                        *prometheus.Desc
}

// NewTunerCollector returns the collector over status (nil: nothing is
// served).
func NewTunerCollector(status func() *tuner.Status) *TunerCollector {
	c := &TunerCollector{status: status}
	c.info = c.add("tuner_info", "The tuner's policy; always 1.", "policy")
	c.actuator = c.add("tuner_actuator_info", "The backend that drives a knob on this host (nvml, sim, mps, nvidia-smi, rebalance-hook, pause), as detected at start; always 1. A knob without a series has no actuator here: its changes are refused as not supported (in recommend mode, recommended).", "knob", "backend")
	c.knobAvailable = c.add("tuner_knob_available", "1 where the host's backends can turn the knob on the GPU, 0 where no backend drives it, every one lists its knobs and leaves it out there, or every one withholds it there (an MPS client's cap without --mps.restart-hook) (the tuner then refuses its changes untried); for each GPU of the latest round and each knob.", "gpu", "uuid", "knob")
	c.mode = c.add("tuner_mode", "1 for the tuner's host-wide mode (off, recommend, enforce), 0 for the others.", "mode")
	c.gpuMode = c.add("tuner_gpu_mode", "1 for the mode the tuner applies to the GPU (off, recommend, enforce: the host-wide mode or the GPU's own), 0 for the others; for each GPU of the latest round.", "gpu", "uuid", "mode")
	c.nodeLock = c.add("tuner_node_lock_held", "1 while this exporter's tuner holds the node lock (--tuner.node-lock: one tuner in enforce per node; a second exits at start, naming the holder), 0 where it takes none (no GPU in enforce mode, an empty --tuner.node-lock, the simulator without the flag).")
	c.killSwitch = c.add("tuner_kill_switch_engaged", "1 while the kill switch (its file exists) stops every change but reverts of the tuner's own.")
	c.lastRun = c.add("tuner_last_run_timestamp_seconds", "When the tuner last ran (the tuner's clock): a round, or the restore at start or at exit, which run no round (/tuner's 'Last round' counts rounds only); served from the start of the restore at start on, so that a restore at start or a first round that never ends shows.")
	c.interval = c.add("tuner_interval_seconds", "The time from the start of one round of the tuner to the next's (--tuner.interval); a round that takes longer is followed at the next whole interval from its start.")
	c.hooksRunning = c.add("tuner_hooks_running", "Actuator calls that run a hook (an MPS client's restart, a rebalancing plan) which the tuner started off its round and has not settled yet, at its latest round.")
	c.hookOldest = c.add("tuner_hook_oldest_running_seconds", "How long the oldest of those calls had run at the tuner's latest round; 0 when none runs.")
	c.unrestored = c.add("tuner_originals_unrestored", "Settings the tuner changed whose originals (journaled) are not restored yet.")
	c.mpsTarget = c.add("tuner_mps_active_threads_target_ratio", "MPS active-thread fraction the tuner last decided for the tenant's clients on the GPU (sum over its clients).", "gpu", "uuid", "tenant")
	c.mpsEffective = c.add("tuner_mps_active_threads_effective_ratio", "MPS active-thread fraction in effect for the tenant's clients on the GPU (sum over the contexts as created).", "gpu", "uuid", "tenant")
	c.powerTarget = c.add("tuner_power_limit_target_watts", "Power limit the tuner targets for the GPU; once set, the limit the GPU holds as read back where that differs.", "gpu", "uuid")
	c.clockTarget = c.add("tuner_locked_clock_target_hertz", "Upper end of the SM clock lock the tuner last decided for the GPU; 0 for unlocked. The range in force is not read back (NVML has no call that returns it): vgpu_gpu_clocks_locked says whether the clocks are locked.", "gpu", "uuid")
	c.timeSliceTarget = c.add("tuner_timeslice_target_info", "Compute time-slice level the tuner last decided for the GPU; always 1.", "gpu", "uuid", "level")
	c.pauseTarget = c.add("tuner_pause_duty_target_ratio", "Fraction of every period the tuner's target pauses the tenant's processes for (pause_duty): the duty last set, or recommended in recommend mode; 0 once thawed; gone once the tenant has run on no GPU for a minute since.", "gpu", "uuid", "tenant")
	c.pauseEffective = c.add("tuner_pause_duty_effective_ratio", "Fraction of every period the tenant's processes are paused for now, as the pause actuator runs it: the largest duty any of the tenant's GPUs asks for, the longest pause capped (--pause.max); 0 where the latest period's freeze failed or the tenant is not paused.", "gpu", "uuid", "tenant")
	c.pauseFailures = c.add("tuner_pause_freeze_failures_total", "Pause periods whose freeze failed, by tenant: each thawed once its freeze did not settle, the tenant not paused as targeted.", "tenant")
	c.pausePeriod = c.add("tuner_pause_period_seconds", "The period of a paused tenant's pulse (--pause.period): paused for the duty of each, running for the rest; a period's failed freeze counts once in vgpu_tuner_pause_freeze_failures_total. Served where the pause actuator reports its failures.")
	c.pauseThaws = c.add("tuner_pause_thaws_pending", "Pauses an earlier run left whose thaw failed at start, tried again at every round (and at exit): tenants that may be left frozen.")
	c.schedulerTarget = c.add("tuner_vgpu_scheduler_target_info", "vGPU scheduler policy the tuner last decided for the GPU; always 1.", "gpu", "uuid", "policy")
	c.actions = c.add("tuner_actions_total", "Actions the tuner's policy planned, by knob and outcome (guarded, recommended, applied, refused, failed, rolled_back).", "knob", "outcome")
	c.refusals = c.add("tuner_guard_refusals_total", "Actions refused by each guard.", "guard")
	c.reverts = c.add("tuner_reverts_total", "Changes reverted because they made the SLO error worse, or rolled back after a failure.")
	c.restores = c.add("tuner_restores_total", "Original settings restored (at exit, or at start: what an earlier run left open in the journal) and paused tenants thawed.")
	c.restoreFailures = c.add("tuner_restore_failures_total", "Original settings that could not be restored.")
	c.jw = c.add("tuner_journal_errors_total", "Writes to the tuner journal that failed.")
	c.jWritable = c.add("tuner_journal_writable", "1 while the tuner journal can be written: its last write succeeded or, after a failed one, a probe since did (each round probes it while its last write failed); 0 while it cannot, when the tuner makes no change (restores go on).")
	c.jDropped = c.add("tuner_journal_records_dropped_total", "Journal records dropped when the journal was read (at open, or one put at its path while in use), by reason: torn (the tail a crash or a full disk left), corrupt, invalid, oversize.", "reason")
	c.jCompactions = c.add("tuner_journal_compactions_total", "Rewrites of the tuner journal to its open originals.")
	c.jSize = c.add("tuner_journal_size_bytes", "Size of the tuner journal.")
	return c
}

// Collect implements prometheus.Collector.
func (c *TunerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.status == nil {
		return
	}
	s := c.status()
	if s == nil {
		return
	}
	e := &emitter{ch: ch}
	e.gauge(c.info, 1, s.Policy)
	for _, a := range s.Actuators {
		e.gauge(c.actuator, 1, string(a.Knob), a.Backend)
	}
	for _, m := range tuner.Modes {
		e.gauge(c.mode, boolValue(m == s.Mode), string(m))
	}
	seen := make(firstSet[string], len(s.GPUs))
	for _, r := range s.GPUs {
		if !seen.add(r.GPU) {
			continue
		}
		gm := s.ModeOf(r.GPU, r.GPUIndex)
		for _, m := range tuner.Modes {
			e.gauge(c.gpuMode, boolValue(m == gm), strconv.Itoa(r.GPUIndex), r.GPU, string(m))
		}
		for _, k := range r.Knobs {
			e.gauge(c.knobAvailable, boolValue(k.Available), strconv.Itoa(r.GPUIndex), r.GPU, string(k.Knob))
		}
	}
	e.gauge(c.killSwitch, boolValue(s.KillSwitch))
	e.gauge(c.nodeLock, boolValue(s.NodeLock.Path != ""))
	if !s.LastRun.IsZero() {
		e.gauge(c.lastRun, unixSeconds(s.LastRun))
	}
	if s.Interval > 0 {
		e.gauge(c.interval, s.Interval.Seconds())
	}
	e.gauge(c.unrestored, float64(s.Unrestored))
	e.gauge(c.hooksRunning, float64(len(s.Hooks)))
	oldest := 0.0
	if len(s.Hooks) > 0 && !s.LastRun.IsZero() {
		oldest = max(0, s.LastRun.Sub(s.Hooks[0].Since).Seconds())
	}
	e.gauge(c.hookOldest, oldest)
	type tk struct{ gpu, uuid, tenant string }
	target, eff := map[tk]float64{}, map[tk]float64{}
	var order []tk
	for _, st := range s.Settings {
		if st.Mode == tuner.ModeRecommend && s.ModeOf(st.GPU, st.GPUIndex) == tuner.ModeEnforce {
			continue // nothing set on a GPU in enforce mode: no target
		}
		g := strconv.Itoa(st.GPUIndex)
		switch v := st.Target.(type) {
		case tuner.Fraction:
			k := tk{g, st.GPU, st.Tenant}
			if _, seen := target[k]; !seen {
				order = append(order, k)
			}
			target[k] += float64(v)
			// the sum in effect is known only where every client's is
			if f, ok := st.Effective.(tuner.Fraction); ok && eff[k] >= 0 {
				eff[k] += float64(f)
			} else {
				eff[k] = -1
			}
		case tuner.Watts:
			e.gauge(c.powerTarget, float64(v), g, st.GPU)
		case tuner.ClockRange:
			e.gauge(c.clockTarget, float64(v.MaxMHz)*1e6, g, st.GPU)
		case tuner.Level:
			e.gauge(c.timeSliceTarget, 1, g, st.GPU, string(v))
		case tuner.Scheduler:
			e.gauge(c.schedulerTarget, 1, g, st.GPU, string(v.Policy))
		case tuner.Duty:
			e.gauge(c.pauseTarget, float64(v), g, st.GPU, st.Tenant)
			if eff, ok := st.Effective.(tuner.Duty); ok {
				e.gauge(c.pauseEffective, float64(eff), g, st.GPU, st.Tenant)
			}
		}
	}
	for _, k := range order {
		e.gauge(c.mpsTarget, target[k], k.gpu, k.uuid, k.tenant)
		if v := eff[k]; v >= 0 {
			e.gauge(c.mpsEffective, v, k.gpu, k.uuid, k.tenant)
		}
	}
	e.gauge(c.pauseThaws, float64(s.Exit.ThawPending))
	if s.PausePeriod > 0 {
		e.gauge(c.pausePeriod, s.PausePeriod.Seconds())
	}
	for tenant, n := range s.PauseFreezeFailures {
		e.counter(c.pauseFailures, float64(n), tenant)
	}
	for k, n := range s.Counts.Actions {
		e.counter(c.actions, float64(n), string(k.Knob), string(k.Outcome))
	}
	for g, n := range s.Counts.Refusals {
		e.counter(c.refusals, float64(n), g)
	}
	e.counter(c.reverts, float64(s.Counts.Reverts))
	e.counter(c.restores, float64(s.Counts.Restores))
	e.counter(c.restoreFailures, float64(s.Counts.RestoreFailures))
	e.counter(c.jw, float64(s.Counts.JournalErrors))
	if j := s.Journal; j != nil {
		e.gauge(c.jWritable, boolValue(j.WriteError == ""))
		for _, why := range tuner.JournalDropReasons {
			e.counter(c.jDropped, float64(j.Dropped[why]), why)
		}
		e.counter(c.jCompactions, float64(j.Compactions))
		e.gauge(c.jSize, float64(j.Size))
	}
}
