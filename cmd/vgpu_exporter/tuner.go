package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
	"github.com/vgpu-exporter/vgpu_exporter/internal/flagvalue"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/policies"
	slowloop "github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
)

// tunerConfig is what the --tuner.* flags set.
type tunerConfig struct {
	Policy         string
	Mode           string
	Interval       time.Duration
	RestoreTimeout time.Duration
	Journal        string
	// NodeLock is the node-wide lock of a tuner in enforce; nodeLockSet
	// whether --tuner.node-lock was given.
	NodeLock       string
	nodeLockSet    bool
	KillSwitchFile string
	GPUModes       []string
	DisabledKnobs  []string
	EnabledKnobs   []string
	// AutotuneParams are NAME=VALUE settings of the autotune policy's
	// parameters.
	AutotuneParams []string
	// SlowLoop is what the --tuner.slow-loop.* flags set: the timings of
	// the rebalancing planner (tuner/rebalance) of the policies that have one.
	SlowLoop slowloop.Timings
}

// addTunerFlags declares the --tuner.* flags.
func addTunerFlags(app *kingpin.Application, c *tunerConfig) {
	modes := make([]string, 0, len(tuner.Modes))
	for _, m := range tuner.Modes {
		modes = append(modes, string(m))
	}
	flagvalue.Enum(app, "tuner.mode", "What the tuner does on this host: off, recommend (decide, journal and export, never act) or enforce.",
		string(tuner.ModeOff), &c.Mode, modes...)
	app.Flag("tuner.policy", "The policy the tuner runs: "+strings.Join(policies.EngineNames(), ", ")+".").
		Default(autotune.Name).StringVar(&c.Policy)
	flagvalue.Duration(app, "tuner.interval", "How often the tuner decides: at least 100ms, the sampler's floor (a round decides on the latest sample; rounds between two samples decide on the same one again).", tuner.DefaultInterval.String(), &c.Interval)
	flagvalue.Duration(app, "tuner.restore-timeout", "How long the restore at exit (and the one at start after an unclean exit) may take to set back what the tuner changed (1s at least): at least 5/4 of --mps.restart-hook.timeout for every MPS client a restore restarts (one after another, within the four fifths of it the exit waits for a hook: 150s for one client of a 2-minute hook, 300s for two), and at least 15 s shorter than the time the service manager gives a stop (Kubernetes' terminationGracePeriodSeconds, which the chart sets so; systemd's TimeoutStopSec, which the exporter extends itself under the shipped Type=notify unit: the shutdown ends after it). What is not set back by then stays in the journal for the next start.", tuner.DefaultRestoreTimeout.String(), &c.RestoreTimeout)
	app.Flag("tuner.journal", "Journal file of the tuner (a regular file of checksummed JSON records, synced, compacted past 1 MiB; docs/journal.md): every original setting before its first change and every outcome; originals are restored from it at exit and at the next start after a crash. Default: none (originals kept in memory only).").
		PlaceHolder("FILE").StringVar(&c.Journal)
	app.Flag("tuner.node-lock", "Lock file that keeps a second tuner in enforce off this node's GPUs, whatever its journal (docs/journal.md, \"One tuner per node\"): the same path for every install on the node; a tuner that finds it held exits with an error naming its holder. Its directory must be there, but the default's, which is made. Empty: no lock. With --backend=sim, taken only when given. Default: "+tuner.DefaultNodeLock+".").
		Default(tuner.DefaultNodeLock).PlaceHolder("FILE").IsSetByUser(&c.nodeLockSet).StringVar(&c.NodeLock)
	app.Flag("tuner.kill-switch-file", "While this file exists the tuner changes nothing but reverts of its own changes (it still decides and exports). A file: a path that names a directory (one there, a '/' at its end, a last element '.' or beginning with '..') is refused.").
		PlaceHolder("FILE").StringVar(&c.KillSwitchFile)
	app.Flag("tuner.gpu-mode", "Mode of one GPU, overriding --tuner.mode: GPU=MODE with GPU an index or a UUID, e.g. 0=enforce. Repeatable.").
		PlaceHolder("GPU=MODE").StringsVar(&c.GPUModes)
	app.Flag("tuner.disable-knob", "A knob the tuner never changes (repeatable): "+strings.Join(tuner.KnobNames(), ", ")+"; e.g. locked_clocks and power_limit for no clock or power control.").
		PlaceHolder("KNOB").SetValue(flagvalue.EachOf("tuner.disable-knob", &c.DisabledKnobs, tuner.KnobNames()...))
	d := slowloop.DefaultTimings()
	flagvalue.Duration(app, "tuner.slow-loop.every", "How often the slow loop (tenant moves, MIG relayouts) considers a plan.", d.Every.String(), &c.SlowLoop.Every)
	flagvalue.Duration(app, "tuner.slow-loop.dwell", "How long a latency tenant must miss its SLO without a break before the slow loop plans a move for it.", d.Dwell.String(), &c.SlowLoop.Dwell)
	flagvalue.Duration(app, "tuner.slow-loop.cool-down", "After a plan of the slow loop (applied, refused or failed), no other one for this long.", d.CoolDown.String(), &c.SlowLoop.CoolDown)
	flagvalue.Duration(app, "tuner.slow-loop.hold", "A tenant moved (or a GPU relayouted) is not moved again for this long.", d.Hold.String(), &c.SlowLoop.Hold)
	app.Flag("tuner.autotune-param", "With --tuner.policy=autotune: one of its parameters, NAME=VALUE (repeatable), over its defaults: "+strings.Join(autotune.ParamNames(), ", ")+" (docs/tuning-parameters.md).").
		PlaceHolder("NAME=VALUE").StringsVar(&c.AutotuneParams)
	app.Flag("tuner.enable-knob", "An opt-in knob the tuner may change (repeatable): "+strings.Join(tuner.OptInNames(), ", ")+" (docs/pause.md).").
		PlaceHolder("KNOB").SetValue(flagvalue.EachOf("tuner.enable-knob", &c.EnabledKnobs, tuner.OptInNames()...))
}

// gpuModes parses the --tuner.gpu-mode values.
func (c *tunerConfig) gpuModes() (map[string]tuner.Mode, error) {
	m, err := tuner.ParseGPUModes(c.GPUModes)
	if err != nil {
		return nil, fmt.Errorf("--tuner.gpu-mode %w", err)
	}
	return m, nil
}

// validate checks the tuner flags.
func (c *tunerConfig) validate() error {
	var errs []error
	switch {
	case c.Interval <= 0:
		errs = append(errs, fmt.Errorf("--tuner.interval must be positive, got %s", c.Interval))
	case c.active() && c.Interval < minSampleInterval:
		// at 1ns the rounds ran back to back, a core's worth, each on the
		// same sample: the tuner's floor is the sampler's
		errs = append(errs, fmt.Errorf("--tuner.interval must be at least %s, got %s: a round decides on the latest sample, and shorter rounds only decide on the same one again", minSampleInterval, c.Interval))
	}
	if c.RestoreTimeout < minRestoreTimeout {
		errs = append(errs, fmt.Errorf("--tuner.restore-timeout must be at least %s, got %s", minRestoreTimeout, c.RestoreTimeout))
	}
	for _, err := range c.SlowLoop.Validate() {
		errs = append(errs, fmt.Errorf("--tuner.slow-loop.%w", err))
	}
	if _, err := c.gpuModes(); err != nil {
		errs = append(errs, err)
	}
	if c.NodeLock != "" && !filepath.IsAbs(c.NodeLock) {
		errs = append(errs, fmt.Errorf("--tuner.node-lock %q is not an absolute path: every install on a node must name the same file", c.NodeLock))
	}
	for _, o := range []struct{ flag, path string }{{"--tuner.journal", c.Journal}, {"--tuner.kill-switch-file", c.KillSwitchFile}} {
		if c.NodeLock != "" && o.path != "" && samePath(c.NodeLock, o.path) {
			errs = append(errs, fmt.Errorf("--tuner.node-lock %q is %s's file: the lock would write its note there (or, created, engage the kill switch); give it a file of its own", c.NodeLock, o.flag))
		}
	}
	if err := checkKillSwitchFile(c.KillSwitchFile); err != nil {
		errs = append(errs, err)
	}
	if both := tuner.KnobsEnabledAndDisabled(c.EnabledKnobs, c.DisabledKnobs); len(both) > 0 {
		errs = append(errs, fmt.Errorf("--tuner.enable-knob and --tuner.disable-knob both name %s: give each knob one of them", strings.Join(both, ", ")))
	}
	for _, name := range autotune.RepeatedParams(c.AutotuneParams) {
		errs = append(errs, fmt.Errorf("--tuner.autotune-param: %s given twice: give it once", name))
	}
	if _, err := c.policy(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkKillSwitchFile refuses a --tuner.kill-switch-file that names a
// directory: one ending in '/', whose last element is '.' or begins with
// '..' (a ConfigMap volume's ..data), or a directory already there. A
// directory is always there: the kill switch would be engaged for good,
// and removing nothing would release it.
func checkKillSwitchFile(file string) error {
	if file == "" {
		return nil
	}
	base := file[strings.LastIndex(file, "/")+1:]
	if base == "" || base == "." || strings.HasPrefix(base, "..") {
		return fmt.Errorf("--tuner.kill-switch-file %q names a directory (or a ConfigMap volume's own ..data), which is always there: the kill switch would be engaged for good; give a file's path, its last element not '.', not beginning with '..', no '/' at its end", file)
	}
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		return fmt.Errorf("--tuner.kill-switch-file %q is a directory, which is always there: the kill switch would be engaged for good; give the path of a file, created to engage it", file)
	}
	return nil
}

// samePath says whether a and b name one path once made absolute.
func samePath(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

// policy makes the policy --tuner.policy names, with the parameters of
// --tuner.autotune-param.
func (c *tunerConfig) policy() (*tuner.TunerPolicy, error) {
	pol, err := policies.NewEngine(c.Policy)
	if err != nil {
		return nil, fmt.Errorf("--tuner.policy: %w", err)
	}
	if err := policies.SetAutotuneParams(pol, c.AutotuneParams); err != nil {
		return nil, fmt.Errorf("--tuner.autotune-param: %w", err)
	}
	return pol, nil
}

// active reports whether the tuner runs at all.
func (c *tunerConfig) active() bool {
	return c.Mode != string(tuner.ModeOff) || len(c.GPUModes) > 0
}

// newTunerRunner builds the tuner over the actuators this host has (the
// backend's own and those of outside programs, detectActuators); an
// actuator that takes the readings (the MPS controller) is subscribed to
// the sampler with subscribe.
func newTunerRunner(cfg *config, src gpu.Source, clock gpu.Clock, snapshot func() *tenant.Snapshot, subscribe func(func(*gpu.Readings)), logger log.Logger) (*tuner.Runner, error) {
	c := &cfg.Tuner
	mode, err := tuner.ParseMode(c.Mode)
	if err != nil {
		return nil, err
	}
	pol, err := c.policy()
	if err != nil {
		return nil, err
	}
	gm, err := c.gpuModes()
	if err != nil {
		return nil, err
	}
	enforce := tuner.AnyEnforce(mode, gm)
	// The node's lock before anything acts (the restore at start included).
	lock, lockState, err := takeNodeLock(cfg, enforce, clock, logger)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok && lock != nil {
			lock.Close()
		}
	}()
	var journal *tuner.Journal
	if c.Journal != "" {
		if journal, err = tuner.OpenJournal(c.Journal); err != nil {
			return nil, fmt.Errorf("--tuner.journal: %w", err)
		}
		tuner.LogJournalRecovery(logger, c.Journal, journal, enforce)
	} else if enforce {
		logNoJournal(cfg, logger)
	}
	var kill *tuner.KillSwitch
	if c.KillSwitchFile != "" {
		kill = &tuner.KillSwitch{File: c.KillSwitchFile}
		warnKillSwitchDir(logger, c.KillSwitchFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), detectTimeout)
	defer cancel()
	backends := detectActuators(ctx, cfg, src, logger)
	opts := pol.ConfigureHost(tuner.Options{
		Actuators: tuner.ActuatorsOf(tuner.ImplsOf(backends)...), Journal: journal,
		Clock: clock, StaleAfter: tuner.StaleAfterFor(cfg.SampleInterval), Mode: mode, GPUModes: gm, Disabled: tuner.Knobs(c.DisabledKnobs), Enabled: tuner.Knobs(c.EnabledKnobs), Logger: logger, Actuated: tuner.DescribeActuators(backends),
		NodeLock: lockState,
	}, kill)
	c.SlowLoop.Apply(opts.Rebalance)
	for _, b := range backends {
		if m, ok := b.Impl.(*mps.Controller); ok {
			opts.MPSStates = m
			subscribe(m.ObserveReadings)
			if enforce && m.RunsHooks() {
				warnRestoreTimeout(logger, c.RestoreTimeout, cfg.Actuators.MPSRestartTimeout)
			}
		}
		if p, ok := b.Impl.(gpu.PauseReporter); ok && opts.Pauses == nil {
			opts.Pauses = p
		}
	}
	for _, a := range opts.Actuated {
		level.Debug(logger).Log("msg", "tuner actuator", "knob", a.Knob, "backend", a.Backend)
	}
	t, err := tuner.New(opts)
	if err != nil {
		return nil, err
	}
	level.Info(logger).Log("msg", "tuner started", "mode", mode, "interval", c.Interval, "policy", pol.Name(), "journal", c.Journal,
		"kill_switch_file", c.KillSwitchFile, "knobs", tuner.DescribeActuated(opts.Actuated), "disabled_knobs", strings.Join(c.DisabledKnobs, " "),
		"enabled_knobs", strings.Join(c.EnabledKnobs, " "), "autotune_params", strings.Join(c.AutotuneParams, " "))
	r := tuner.NewRunner(t, journal, clock, c.Interval, snapshot, logger)
	r.SetRestoreTimeout(c.RestoreTimeout)
	// a round's bound never kills an outside program before its own timeout
	r.SetCallTimeout(max(cfg.Actuators.MPSTimeout, cfg.Actuators.NvidiaSMITimeout))
	r.CloseAtExit(closersAtExit(backends)...)
	if lock != nil {
		r.ReleaseAtExit(lock) // after the restore at exit and the journal's close: held by the runner until then
	}
	ok = true
	return r, nil
}

// takeNodeLock takes --tuner.node-lock for a tuner in enforce (none in
// recommend, which changes nothing, nor on the simulator's own GPUs unless
// the flag is given); nil where none is taken, with why for the status.
func takeNodeLock(cfg *config, enforce bool, clock gpu.Clock, logger log.Logger) (*tuner.NodeLock, tuner.NodeLockState, error) {
	c := &cfg.Tuner
	switch {
	case !enforce:
		return nil, tuner.NodeLockState{NotTaken: tuner.NodeLockNotEnforcing}, nil
	case cfg.Backend == backendSim && !c.nodeLockSet:
		return nil, tuner.NodeLockState{NotTaken: tuner.NodeLockSimulated}, nil
	case c.NodeLock == "":
		level.Warn(logger).Log("msg", "tuner in enforce without --tuner.node-lock: nothing keeps another exporter's tuner (another journal) off this node's GPUs")
		return nil, tuner.NodeLockState{NotTaken: tuner.NodeLockNoFile}, nil
	}
	lock, err := tuner.AcquireNodeLock(c.NodeLock, tuner.NodeLockHolder{Journal: c.Journal, Mode: c.Mode, Started: clock.Now()})
	if err != nil {
		return nil, tuner.NodeLockState{}, fmt.Errorf("--tuner.node-lock: %w", err)
	}
	level.Info(logger).Log("msg", "tuner holds the node lock: no other tuner in enforce starts on this node", "node_lock", c.NodeLock)
	return lock, tuner.NodeLockState{Path: c.NodeLock}, nil
}

// warnKillSwitchDir warns where the kill-switch file's directory is not
// there: the file an operator creates to stop the tuner could not be
// created then, at the moment it is needed.
func warnKillSwitchDir(logger log.Logger, file string) {
	dir := filepath.Dir(file)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		level.Warn(logger).Log("msg", "the directory of --tuner.kill-switch-file is not there: creating the file to stop the tuner fails until it is made", "dir", dir, "file", file)
	}
}

// warnRestoreTimeout warns where the restore at exit (its wait for a hook,
// tuner.ExitHookWait) is given less time than one run of the MPS restart
// hook may take: a restore that sets an MPS client's cap back restarts
// the client through the hook, and would be cut short by its deadline,
// what it had not set back left in the journal for the next start.
func warnRestoreTimeout(logger log.Logger, restore, hook time.Duration) {
	if tuner.ExitHookWait(restore) < hook {
		level.Warn(logger).Log("msg", "four fifths of --tuner.restore-timeout (the exit's wait for a hook) is shorter than --"+flagMPSRestartTimeout+": a restore that sets back an MPS client's cap runs the restart hook and may be cut short, leaving the rest to the next start; give the restore at least 5/4 of the hook's timeout for every client it may restart (and the service manager's stop longer than that)",
			"restore_timeout", restore, "restart_hook_timeout", hook)
	}
}

// detectTimeout bounds the detection of the tuner's actuators at start
// (the port opens after it: startBound counts it).
const detectTimeout = time.Minute

// thawWithTunerOff is a start with the tuner off and a journal: the
// tenants an earlier run left paused in it are thawed (tuner.StartOff),
// through the actuators that pause (thawActuators), built only when there
// is a pause to thaw and closed after it, within --tuner.restore-timeout.
func thawWithTunerOff(cfg *config, src gpu.Source, clock gpu.Clock, logger log.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Tuner.RestoreTimeout)
	defer cancel()
	var backends []tuner.NamedActuator
	_, _ = tuner.StartOff(ctx, cfg.Tuner.Journal, clock, func() (tuner.Actuators, error) {
		var why error
		backends, why = thawActuators(cfg, src, logger)
		return tuner.ActuatorsOf(tuner.ImplsOf(backends)...), why
	}, logger)
	for _, c := range closersAtExit(backends) {
		if err := c.Close(); err != nil {
			level.Error(logger).Log("msg", "closing an actuator after the thaw at start", "err", err)
		}
	}
}

// closersAtExit are the actuators among backends that the restore at exit
// closes (Runner.CloseAtExit): those that hold something of their own. A
// GPU source among them is the backend or one it wraps (the NVML backend
// under dcgm-exporter's): the shutdown closes it, after the pipeline that
// samples it has stopped.
func closersAtExit(backends []tuner.NamedActuator) []io.Closer {
	var out []io.Closer
	for _, b := range backends {
		cl, ok := b.Impl.(io.Closer)
		if _, isSource := b.Impl.(gpu.Source); ok && !isSource {
			out = append(out, cl)
		}
	}
	return out
}

// logNoJournal says what a tuner that acts without --tuner.journal
// loses at a crash: on GPUs that keep their settings, the originals it
// changed (a warning); on the simulator without --sim.settings-file,
// nothing, since the simulated GPUs' settings end with the process.
func logNoJournal(cfg *config, logger log.Logger) {
	if cfg.Backend == backendSim && cfg.SimSettingsFile == "" {
		level.Info(logger).Log("msg", "tuner acting without --tuner.journal: none is needed here, the simulated GPUs' settings live in this process only (no --sim.settings-file) and a crash leaves none changed; originals are restored at exit from memory")
		return
	}
	level.Warn(logger).Log("msg", "tuner in enforce mode without --tuner.journal: original settings are kept in memory only and are not restored after a crash")
}

// tunerStatus is the tuner's published status; nil when the tuner is off.
func (s *service) tunerStatus() *tuner.Status {
	if s.tuner == nil {
		return nil
	}
	return s.tuner.Status()
}

// pageVersion is what the /metrics page rendered once per version is of:
// the snapshot, and the status the tuner published, which changes on its
// own (a round ends while the samples fail or a sample hangs).
type pageVersion struct {
	snap  *tenant.Snapshot
	tuner *tuner.Status
}

// Version changes whenever what the /metrics page renders does: the
// snapshot (the pipeline's Version) or the tuner's published status.
func (s *service) Version() any {
	v := pageVersion{snap: s.Snapshot()}
	if s.tuner != nil {
		v.tuner = s.tuner.Tuner().Status()
	}
	return v
}

// withTuner returns the GPU/tenant collector and, when the tuner runs, the
// tuner's collector beside it (collector.WithTuner).
func (s *service) withTuner(newCollector collectorFunc, logger log.Logger, filters []string) (prometheus.Collector, error) {
	var status func() *tuner.Status
	if s.tuner != nil {
		status = s.tuner.Status
	}
	return collector.WithTuner(func(f ...string) (prometheus.Collector, error) {
		c, err := newCollector(s.Snapshot, logger, f...)
		if e, ok := c.(*collector.Exporter); ok && err == nil {
			e.ShareErrors(s.collectorErrs)
		}
		return c, err
	}, status, filters)
}
