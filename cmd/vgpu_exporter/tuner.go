package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/mps"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// tunerConfig is what the --tuner.* flags set.
type tunerConfig struct {
	Policy         string
	Mode           string
	Interval       time.Duration
	Journal        string
	KillSwitchFile string
	GPUModes       []string
	DisabledKnobs  []string
	EnabledKnobs   []string
}

// addTunerFlags declares the --tuner.* flags.
func addTunerFlags(app *kingpin.Application, c *tunerConfig) {
	modes := make([]string, 0, len(tuner.Modes))
	for _, m := range tuner.Modes {
		modes = append(modes, string(m))
	}
	enumFlag(app, "tuner.mode", "What the tuner does on this host: off, recommend (decide, journal and export, never act) or enforce.",
		string(tuner.ModeOff), &c.Mode, modes...)
	app.Flag("tuner.policy", "The policy the tuner runs: "+strings.Join(tunerPolicies(), ", ")+".").
		Default(tuner.AutotuneName).StringVar(&c.Policy)
	durationFlag(app, "tuner.interval", "How often the tuner decides.", tuner.DefaultInterval.String(), &c.Interval)
	app.Flag("tuner.journal", "Journal file of the tuner (a regular file of checksummed JSON records, synced, compacted past 1 MiB; docs/tuning.md): every original setting before its first change and every outcome; originals are restored from it at exit and at the next start after a crash. Default: none (originals kept in memory only).").
		PlaceHolder("FILE").StringVar(&c.Journal)
	app.Flag("tuner.kill-switch-file", "While this file exists the tuner changes nothing (it still decides and exports).").
		PlaceHolder("FILE").StringVar(&c.KillSwitchFile)
	app.Flag("tuner.gpu-mode", "Mode of one GPU, overriding --tuner.mode: GPU=MODE with GPU an index or a UUID, e.g. 0=enforce. Repeatable.").
		PlaceHolder("GPU=MODE").StringsVar(&c.GPUModes)
	app.Flag("tuner.disable-knob", "A knob the tuner never changes (repeatable): "+strings.Join(tuner.KnobNames(), ", ")+"; e.g. locked_clocks and power_limit for no clock or power control.").
		PlaceHolder("KNOB").EnumsVar(&c.DisabledKnobs, tuner.KnobNames()...)
	app.Flag("tuner.enable-knob", "An opt-in knob the tuner may change (repeatable): "+strings.Join(tuner.OptInNames(), ", ")+" (docs/tuning.md).").
		PlaceHolder("KNOB").EnumsVar(&c.EnabledKnobs, tuner.OptInNames()...)
}

// knobs returns flag values as knobs.
func knobs(names []string) []gpu.Knob {
	out := make([]gpu.Knob, 0, len(names))
	for _, k := range names {
		out = append(out, gpu.Knob(k))
	}
	return out
}

// gpuModes parses the --tuner.gpu-mode values.
func (c *tunerConfig) gpuModes() (map[string]tuner.Mode, error) {
	out := map[string]tuner.Mode{}
	for _, v := range c.GPUModes {
		g, m, ok := strings.Cut(v, "=")
		if !ok || g == "" {
			return nil, fmt.Errorf("--tuner.gpu-mode %q: want GPU=MODE, e.g. 0=enforce", v)
		}
		mode, err := tuner.ParseMode(m)
		if err != nil {
			return nil, fmt.Errorf("--tuner.gpu-mode %q: %w", v, err)
		}
		out[g] = mode
	}
	return out, nil
}

// validate checks the tuner flags.
func (c *tunerConfig) validate() error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--tuner.interval must be positive, got %s", c.Interval))
	}
	if _, err := c.gpuModes(); err != nil {
		errs = append(errs, err)
	}
	if _, err := tuner.NewEnginePolicy(c.Policy); err != nil {
		errs = append(errs, fmt.Errorf("--tuner.policy: %w", err))
	}
	return errors.Join(errs...)
}

// tunerPolicies are the policies --tuner.policy takes.
func tunerPolicies() []string {
	var out []string
	for _, n := range tuner.PolicyNames() {
		if _, err := tuner.NewEnginePolicy(n); err == nil {
			out = append(out, n)
		}
	}
	return out
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
	pol, err := tuner.NewEnginePolicy(c.Policy)
	if err != nil {
		return nil, fmt.Errorf("--tuner.policy: %w", err)
	}
	gm, err := c.gpuModes()
	if err != nil {
		return nil, err
	}
	var journal *tuner.Journal
	if c.Journal != "" {
		if journal, err = tuner.OpenJournal(c.Journal); err != nil {
			return nil, fmt.Errorf("--tuner.journal: %w", err)
		}
		tuner.LogJournalRecovery(logger, c.Journal, journal)
	} else if mode == tuner.ModeEnforce {
		level.Warn(logger).Log("msg", "tuner in enforce mode without --tuner.journal: original settings are kept in memory only and are not restored after a crash")
	}
	var kill *tuner.KillSwitch
	if c.KillSwitchFile != "" {
		kill = &tuner.KillSwitch{File: c.KillSwitchFile}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backends := detectActuators(ctx, cfg, src, logger)
	named := make([]tuner.NamedActuator, len(backends))
	for i, b := range backends {
		named[i] = tuner.NamedActuator{Name: b.Name, Impl: b.Impl}
	}
	opts := pol.Configure(tuner.Options{
		Actuators: tuner.ActuatorsOf(actuatorImpls(backends)...), Journal: journal,
		Clock: clock, Mode: mode, GPUModes: gm, Disabled: knobs(c.DisabledKnobs), Enabled: knobs(c.EnabledKnobs), Logger: logger, Actuated: tuner.DescribeActuators(named),
	}, kill)
	for _, b := range backends {
		if m, ok := b.Impl.(*mps.Controller); ok {
			opts.MPSStates = m
			subscribe(m.ObserveReadings)
		}
	}
	for _, a := range opts.Actuated {
		level.Info(logger).Log("msg", "tuner actuator", "knob", a.Knob, "backend", a.Backend)
	}
	t, err := tuner.New(opts)
	if err != nil {
		return nil, err
	}
	level.Info(logger).Log("msg", "tuner started", "mode", mode, "interval", c.Interval, "policy", pol.Name(), "journal", c.Journal)
	return tuner.NewRunner(t, journal, clock, c.Interval, snapshot, logger), nil
}

// tunerStatus is the tuner's published status; nil when the tuner is off.
func (s *service) tunerStatus() *tuner.Status {
	if s.tuner == nil {
		return nil
	}
	return s.tuner.Status()
}

// tunerCollectorName is the collect[] name of the tuner's metrics.
const tunerCollectorName = "tuner"

// withTuner returns the GPU/tenant collector and, when the tuner runs, the
// tuner's collector beside it. With collect[] filters, "tuner" selects the
// tuner's metrics.
func (s *service) withTuner(newCollector collectorFunc, logger log.Logger, filters []string) (prometheus.Collector, error) {
	wantTuner := s.tuner != nil
	rest := filters
	if len(filters) > 0 {
		wantTuner, rest = false, nil
		for _, f := range filters {
			if f == tunerCollectorName && s.tuner != nil {
				wantTuner = true
				continue
			}
			rest = append(rest, f)
		}
	}
	if !wantTuner {
		return newCollector(s.Snapshot, logger, filters...)
	}
	tc := collector.NewTunerCollector(s.tuner.Status)
	if len(filters) > 0 && len(rest) == 0 {
		return tc, nil
	}
	c, err := newCollector(s.Snapshot, logger, rest...)
	if err != nil {
		return nil, err
	}
	return collector.List{c, tc}, nil
}
