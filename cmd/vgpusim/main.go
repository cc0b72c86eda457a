// Command vgpusim runs a GPU-sharing scenario offline in virtual time with a
// chosen sharing policy, prints a per-tenant summary and writes the time
// series and plots of the run. See docs/vgpusim.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/vgpu-exporter/vgpu_exporter/internal/flagvalue"
	"github.com/vgpu-exporter/vgpu_exporter/oracle"
	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
	"github.com/vgpu-exporter/vgpu_exporter/simrun/table"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
)

// gcPercent is the collector's target heap growth (GOGC) of a run when the
// environment sets none: a run is a batch job whose live heap is small
// against the memory it churns, so collecting less often saves CPU for
// memory (docs/vgpusim.md, Performance).
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx := interruptible()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stderr))
	os.Exit(code)
}

// interruptible is a context that the first interrupt (Ctrl-C) or
// SIGTERM (kill, timeout) cancels, for the run to stop and say so; a
// second one ends the process at once, as the default handler does, where
// stopping takes longer than the user will wait.
func interruptible() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx
}

// usageTemplate is kingpin's template of --help and the usage of an
// error; TestDocsRunFlags reads the flags' defaults through another.
var usageTemplate = kingpin.DefaultUsageTemplate

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// errExit carries an exit status out of kingpin's Terminate hook.
type errExit struct{ code int }

// run is the whole command: it parses args, runs the chosen subcommand and
// returns the exit status. progress enables the progress bar on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, progress bool) (code int) {
	app := kingpin.New("vgpusim", "Run a GPU-sharing scenario offline in virtual time with a sharing policy, and report what each tenant got.")
	app.Version(version.Print("vgpusim"))
	app.HelpFlag.Short('h')
	// kingpin panics on a help text it fails to write (standard output
	// full or closed), and passes over a version it fails to write: the
	// writer keeps the error, and the command ends with it
	usage := &keptErrWriter{w: stdout}
	app.UsageWriter(usage)
	app.UsageTemplate(usageTemplate)
	app.ErrorWriter(stderr)
	app.Terminate(func(c int) { panic(errExit{c}) })
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(errExit)
			if !ok {
				panic(r)
			}
			code = e.code
		}
		if usage.err != nil && code == 0 {
			fmt.Fprintf(stderr, "vgpusim: error: %v\n", usage.err)
			code = 1
		}
	}()

	runCmd := app.Command("run", "Run a scenario and report.")
	var cfg runConfig
	var seedSet, tenantsSet, outSet bool
	runCmd.Flag("scenario", "Scenario file, or the name of a built-in scenario (see 'vgpusim list').").Required().StringVar(&cfg.Scenario)
	runCmd.Flag("tenants", "Tenants file for attribution; default: the scenario's <name>.tenants.yaml companion when it exists.").IsSetByUser(&tenantsSet).StringVar(&cfg.Tenants)
	runCmd.Flag("policy", "Sharing policy: "+strings.Join(simrun.PolicyNames(), ", ")+" (searches replays for the best static setting per phase).").Default(baseline.UncappedName).StringVar(&cfg.Policy)
	runCmd.Flag("disable-knob", "With a tuner policy (autotune, best-effort, static-equal): a knob the tuner never changes (repeatable): "+strings.Join(tuner.KnobNames(), ", ")+"; e.g. locked_clocks and power_limit for the same run without clock or power control.").
		PlaceHolder("KNOB").SetValue(flagvalue.EachOf("disable-knob", &cfg.DisabledKnobs, tuner.KnobNames()...))
	runCmd.Flag("enable-knob", "With a tuner policy: an opt-in knob it may change (repeatable): "+strings.Join(tuner.OptInNames(), ", ")+" (docs/pause.md).").
		PlaceHolder("KNOB").SetValue(flagvalue.EachOf("enable-knob", &cfg.EnabledKnobs, tuner.OptInNames()...))
	runCmd.Flag("autotune.param", "With --policy autotune: one of its parameters, NAME=VALUE (repeatable), over its defaults: "+strings.Join(autotune.ParamNames(), ", ")+" (docs/tuning-parameters.md).").
		PlaceHolder("NAME=VALUE").StringsVar(&cfg.AutotuneParams)
	var duration, seed, step, seeds string
	runCmd.Flag("duration", "Virtual time to simulate, e.g. 90s or 1h; default: the scenario's duration.").StringVar(&duration)
	runCmd.Flag("seed", "Random seed (non-zero); default: the scenario's seed.").IsSetByUser(&seedSet).StringVar(&seed)
	runCmd.Flag("seeds", "Run once per seed and report each figure's mean and spread: a count N (--seed, else the scenario's seed, and the N-1 after it) or a list (1,2,3).").StringVar(&seeds)
	runCmd.Flag("step", "Sample, policy and report step in virtual time.").Default(simrun.DefaultStep.String()).StringVar(&step)
	runCmd.Flag("out", "Directory to write the summary, time series and plots into; nothing is written without it.").IsSetByUser(&outSet).StringVar(&cfg.Out)
	var formatSet bool
	runCmd.Flag("format", "Time series format in --out: csv or json.").Default(report.FormatCSV).IsSetByUser(&formatSet).SetValue(flagvalue.OneOf("format", &cfg.Format, report.FormatCSV, report.FormatJSON))

	listCmd := app.Command("list", "List the built-in scenarios.")

	tablesCmd := app.Command("tables", "Run every built-in scenario under each policy on each seed and print the scenario tables of scenarios/README.md and docs/tuning.md.")
	tables := table.Options{Run: simrun.Config{Step: simrun.DefaultStep, StepFixed: true}}
	var tableSeeds, tablePolicies, tableDuration string
	tablesCmd.Flag("seeds", "Seeds of every run: a range (4-6), a seed or a list (1,5,9).").Default("1-3").StringVar(&tableSeeds)
	tablesCmd.Flag("policies", "Policies, in row order; the policy table needs "+baseline.StaticEqualName+" and "+baseline.UncappedName+" (its goodput columns), the slack table alone (--no-policy-table --slack) any.").
		Default(strings.Join([]string{baseline.StaticEqualName, baseline.UncappedName, autotune.Name, oracle.Name}, ",")).StringVar(&tablePolicies)
	tablesCmd.Flag("policy-table", "Print the policy table (--no-policy-table: only the slack table).").Default("true").BoolVar(&tables.Policy)
	tablesCmd.Flag("slack", "Print the SLO slack table, on the first seed.").BoolVar(&tables.Slack)
	tablesCmd.Flag("scenario", "A scenario file (with its <name>.tenants.yaml companion, as run reads it) or the name of a built-in scenario to run (repeatable); default: every built-in one.").StringsVar(&tables.Scenarios)
	tablesCmd.Flag("duration", "Virtual time of every run; default: each scenario's duration.").StringVar(&tableDuration)

	if len(args) == 0 {
		// kingpin would print the usage and exit 0: a script whose
		// command word came out empty would pass
		app.Errorf("no command given (run, list or tables), try --help")
		return 1
	}
	cmd, err := app.Parse(joinNegativeValues(app, args))
	if err != nil {
		app.Errorf("%v, try --help", err)
		return 1
	}
	switch cmd {
	case listCmd.FullCommand():
		if err := listScenarios(stdout); err != nil {
			app.Errorf("%v", err)
			return 1
		}
		return 0
	case tablesCmd.FullCommand():
		err := parseTableFlags(&tables, tableSeeds, tablePolicies, tableDuration)
		if err == nil {
			tables.Log = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
			err = table.Write(ctx, stdout, tables)
		}
		if err != nil {
			app.Errorf("%v", interrupted(ctx, err))
			return 1
		}
		return 0
	case runCmd.FullCommand():
		if err := parseRunFlags(&cfg, duration, seed, step, seedSet); err != nil {
			app.Errorf("%v", err)
			return 1
		}
		if formatSet && cfg.Out == "" {
			// the summary on standard output is text whatever the format
			app.Errorf("--format %s: only the files of --out have a format; give --out DIR", cfg.Format)
			return 1
		}
		// an empty value (a script's unset variable) would run as if the
		// flag were not there: with the companion, writing nothing
		if tenantsSet && cfg.Tenants == "" {
			app.Errorf("--tenants \"\": want a tenants file (leave the flag out for the scenario's companion)")
			return 1
		}
		if outSet && cfg.Out == "" {
			app.Errorf("--out \"\": want a directory (leave the flag out to write nothing)")
			return 1
		}
		if cfg.Out == "-" {
			app.Errorf("--out -: want a directory for the run's files (the summary goes to standard output already)")
			return 1
		}
		undo := func() {}
		if cfg.Out != "" {
			var err error
			if undo, err = makeOut(cfg.Out); err != nil {
				app.Errorf("--out: %v", err)
				return 1
			}
		}
		var err error
		if seeds != "" {
			var n int
			var list []int64
			if n, list, err = simrun.ParseSeeds(seeds); err == nil {
				err = runSeeds(ctx, cfg, n, list, stdout)
			}
		} else {
			if progress {
				cfg.Progress = newBar(stderr)
			}
			err = runScenario(ctx, cfg, stdout)
		}
		if err != nil {
			undo()
			app.Errorf("%v", interrupted(ctx, err))
			return 1
		}
		return 0
	}
	return 1
}

// interrupted says so of the error of a run that ctx ended (an
// interrupt): the step it stopped reads "context canceled", as if the
// policy or the sampler had failed.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return err
}

// parseRunFlags parses the flags whose errors kingpin would not attribute
// to the flag.
func parseRunFlags(cfg *runConfig, duration, seed, step string, seedSet bool) error {
	var err error
	if duration != "" {
		if cfg.Duration, err = time.ParseDuration(duration); err != nil {
			return fmt.Errorf("--duration %q: want a duration such as 90s, 10m or 1h", duration)
		}
		if cfg.Duration == 0 {
			return errZeroDuration(duration)
		}
	}
	if cfg.Step, err = time.ParseDuration(step); err != nil {
		return fmt.Errorf("--step %q: want a duration such as 1s or 500ms", step)
	}
	if seedSet {
		if cfg.Seed, err = strconv.ParseInt(seed, 10, 64); err != nil || cfg.Seed == 0 {
			return fmt.Errorf("--seed %q: want a non-zero integer", seed)
		}
		cfg.SeedSet = true
	}
	return nil
}

// errZeroDuration refuses a --duration of 0, which would otherwise run
// the scenario's own duration: leaving the flag out says that.
func errZeroDuration(duration string) error {
	return fmt.Errorf("--duration %q: want a positive duration (leave the flag out for the scenario's own duration)", duration)
}

// newBar returns a progress callback drawing a bar on w.
func newBar(w io.Writer) func(done, total int64) {
	var bar *progressbar.ProgressBar
	return func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription("simulating"),
				progressbar.OptionShowCount(),
				progressbar.OptionSetItsString("steps"),
				progressbar.OptionShowIts(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionSetWidth(30),
			)
		}
		_ = bar.Set64(done)
		if done >= total {
			_ = bar.Finish()
		}
	}
}

// keptErrWriter writes to w until a write fails, and then nothing; it
// keeps that error and reports none.
type keptErrWriter struct {
	w   io.Writer
	err error
}

func (k *keptErrWriter) Write(p []byte) (int, error) {
	if k.err == nil {
		_, k.err = k.w.Write(p)
	}
	return len(p), nil
}

// runConfig is what `vgpusim run` was asked to do: a run, and where and
// how to write its files.
type runConfig struct {
	simrun.Config
	Out    string
	Format string
}

// runScenario runs the scenario, prints the summary on stdout and writes
// the files into cfg.Out.
func runScenario(ctx context.Context, cfg runConfig, stdout io.Writer) error {
	res, err := simrun.Run(ctx, cfg.Config)
	if err != nil {
		return err
	}
	// Files first, so that they are complete even when stdout goes away
	// (vgpusim run ... | head).
	var paths []string
	if cfg.Out != "" {
		if paths, err = res.WriteFiles(cfg.Out, cfg.Format); err != nil {
			return err
		}
	}
	if err := report.WriteSummaryText(stdout, res.Recorder.Summary()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "policy %s: %d decisions, %d applied\n", res.Recorder.Meta().Policy, len(res.Decisions), res.Applied())
	simrun.WriteRestarts(stdout, res.Actions)
	if res.Plan != nil {
		res.Plan.Write(stdout)
	}
	if cfg.Out != "" {
		fmt.Fprintf(stdout, "wrote %d files into %s\n", len(paths), cfg.Out)
	}
	return nil
}
