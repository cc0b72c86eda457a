package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/pipeline"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// stuckBuilder is a builder whose background work never ends (a read of a
// FIFO, a server that never answers).
type stuckBuilder struct{ pipeline.Builder }

func (b stuckBuilder) Start(ctx context.Context) {
	if s, ok := b.Builder.(pipeline.Starter); ok {
		s.Start(ctx)
	}
}
func (stuckBuilder) Wait() { select {} }

// serveSim builds the exporter on the simulator with args and serves it
// until the returned stop is called; stop returns serve's error.
func serveSim(t *testing.T, wrap func(pipeline.Builder) pipeline.Builder, args ...string) (*service, func() error) {
	t.Helper()
	cfg := testConfig(t, append([]string{"--web.listen-address=" + freeAddr(t), "--backend=sim", "--sim.scenario=noisy-neighbour", "--sample.interval=100ms"}, args...)...)
	svc, err := buildOn(cfg, gpu.RealClock{}, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		svc.SetBuilder(wrap(svc.Builder()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, cfg, newCollector, make(chan os.Signal)) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			t.Fatal("serve did not return after cancel")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return svc, stop
}

// leftovers are the simulated settings that differ from their first values.
func leftovers(t *testing.T, path string) []sim.PersistedSetting {
	t.Helper()
	set, err := sim.ReadPersisted(path)
	if err != nil {
		t.Fatal(err)
	}
	return sim.Leftovers(set)
}

// Shutdown restores the tuner's originals first: a background read that
// never ends does not keep them from being set back, nor the exit status
// from saying so.
func TestShutdownRestoresFirstWhateverIsStuck(t *testing.T) {
	dir := t.TempDir()
	settings, journal := filepath.Join(dir, "settings.json"), filepath.Join(dir, "journal")
	svc, stop := serveSim(t, func(b pipeline.Builder) pipeline.Builder { return stuckBuilder{b} },
		"--tuner.mode=enforce", "--tuner.policy=static-equal", "--tuner.interval=100ms",
		"--tuner.journal="+journal, "--sim.settings-file="+settings)
	waitUntil(t, "the tuner's changes", func() bool { return svc.tunerStatus().Unrestored == 2 })
	if n := len(leftovers(t, settings)); n != 2 {
		t.Fatalf("%d settings changed, want 2", n)
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
	if n := leftovers(t, settings); len(n) != 0 {
		t.Errorf("settings left changed after the shutdown: %+v", n)
	}
	if took := time.Since(start); took > shutdownTimeout+tuner.DefaultRestoreTimeout {
		t.Errorf("shutdown took %v", took)
	}
	b, _ := os.ReadFile(journal)
	if c := strings.Count(string(b), `"event":"restored"`); c != 2 {
		t.Errorf("%d restored records in the journal, want 2", c)
	}
}

// An earlier run's originals are restored at start, before the tuner's
// first round (here an hour away).
func TestCrashRestoreAtStart(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	const uuid = "GPU-58df9232-29cc-550c-e4e0-c6a70f3f36eb" // noisy-neighbour's GPU
	line := `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"` + uuid + `","knob":"mps_active_threads","pid":61002},"tenant":"embed","from":{"kind":"fraction","num":1}}` + "\n"
	if err := os.WriteFile(journal, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, stop := serveSim(t, nil, "--tuner.mode=enforce", "--tuner.policy=static-equal", "--tuner.interval=1h", "--tuner.journal="+journal)
	deadline := time.Now().Add(5 * time.Second)
	for svc.tunerStatus().Counts.Restores == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the journal's original was not restored within 5s of the start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s := svc.tunerStatus()
	if applied := s.Counts.Actions[tuner.ActionKey{Knob: gpu.KnobMPSActiveThreads, Outcome: tuner.OutcomeApplied}]; s.Unrestored != 0 || applied != 0 {
		t.Errorf("after the start: %d unrestored, %d changes applied (no round was due)", s.Unrestored, applied)
	}
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
}

// A stop shortly after a change, while the MPS client's restart is still
// in progress, waits for it and sets the original back: the exit status
// is 0 and no setting is left changed.
func TestStopShortlyAfterAChangeRestores(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	svc, stop := serveSim(t, nil, "--tuner.mode=enforce", "--tuner.policy=static-equal", "--tuner.interval=100ms",
		"--tuner.journal="+filepath.Join(dir, "journal"), "--sim.settings-file="+settings)
	waitUntil(t, "the tuner's changes", func() bool { return svc.tunerStatus().Unrestored == 2 })
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
	if n := leftovers(t, settings); len(n) != 0 {
		t.Errorf("settings left changed: %+v", n)
	}
}

// A start says what its journal holds changed and not restored, and what
// it does with it: in enforce it restores it; in recommend, and with the
// tuner off (no GPU's mode), it thaws the paused tenants, named, and
// leaves the rest. Nothing is said of an empty one.
func TestStartSaysWhatTheJournalHolds(t *testing.T) {
	const (
		power = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n"
		pause = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"pause_duty","pid":7},"tenant":"train","from":{"kind":"duty","num":0},"pids":[7]}` + "\n"
	)
	for _, c := range []struct {
		name, mode, journal string
		want                []string
	}{
		{"off, two originals, one a pause", "off", power + pause, []string{"level=warn", "the tuner is off", "thawing the paused tenants among them", "originals=2", "paused=1", "paused_tenants=train"}},
		{"off, none", "off", "", nil},
		{"recommend", "recommend", power + pause, []string{"level=warn", "paused tenants are thawed, the other settings stay as they are", "originals=2"}},
		{"enforce", "enforce", power + pause, []string{"level=warn", "restoring them now", "originals=2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(journal, []byte(c.journal), 0o600); err != nil {
				t.Fatal(err)
			}
			var buf strings.Builder
			cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.journal="+journal, "--tuner.mode="+c.mode)
			svc, err := buildOn(cfg, gpu.RealClock{}, log.NewLogfmtLogger(log.NewSyncWriter(&buf)))
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			var line string
			for l := range strings.Lines(buf.String()) {
				if strings.Contains(l, "journal holds") {
					line = l
					break
				}
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("no %q in the warning %q", w, line)
				}
			}
			if c.want == nil && line != "" {
				t.Errorf("a warning with nothing journaled: %q", line)
			}
		})
	}
}

// With the tuner off the journal is read, not written: a torn tail and a
// corrupt record stay as they are (the next start with the tuner on
// reports and cuts them), no file is made where none is, and no lock is
// taken that a tuner starting beside it would meet.
func TestTunerOffLeavesJournalAsIs(t *testing.T) {
	const held = `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"GPU-0","knob":"power_limit"},"from":{"kind":"watts","num":700}}` + "\n" +
		"not a record\n" + `{"time":"2026-01-01T00:00:01Z","ev`
	dir := t.TempDir()
	for _, c := range []struct {
		name, journal string
		exists        bool
	}{{"torn and corrupt", held, true}, {"none", "", false}} {
		t.Run(c.name, func(t *testing.T) {
			journal := filepath.Join(dir, c.name)
			if c.exists {
				if err := os.WriteFile(journal, []byte(c.journal), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.journal="+journal, "--tuner.mode=off")
			svc, err := buildOn(cfg, gpu.RealClock{}, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			got, err := os.ReadFile(journal)
			switch {
			case !c.exists && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("a journal made with the tuner off: %q, %v", got, err)
			case c.exists && string(got) != c.journal:
				t.Errorf("the journal changed with the tuner off:\n%q\nwant\n%q", got, c.journal)
			}
		})
	}
}

// With the tuner off (no GPU's mode, the tuner not built) a start thaws
// the tenants an earlier run left paused, as a start in recommend mode
// does, and closes their originals in the journal; the other settings
// stay open. A journal another exporter holds, a thaw that fails or a
// journal that cannot be read is logged, and the start goes on.
func TestTunerOffThawsJournaledPauses(t *testing.T) {
	const uuid = "GPU-58df9232-29cc-550c-e4e0-c6a70f3f36eb" // noisy-neighbour's GPU
	original := func(gpu, knob, rest string) string {
		return `{"time":"2026-01-01T00:00:00Z","event":"original","target":{"gpu":"` + gpu + `","knob":"` + knob + `"` + rest + "\n"
	}
	power := original(uuid, "power_limit", `},"from":{"kind":"watts","num":700}}`)
	pause := original(uuid, "pause_duty", `,"pid":61002},"tenant":"embed","from":{"kind":"duty","num":0},"pids":[61002]}`)
	lost := original("GPU-0", "pause_duty", `,"pid":7},"tenant":"train","from":{"kind":"duty","num":0},"pids":[7]}`)
	for _, c := range []struct {
		name, journal string
		held, dir     bool   // another exporter holds the journal; it is a directory
		open          string // the knobs left open
		thawed        bool   // the simulator thawed embed
		log           string
	}{
		{name: "a pause and a power limit", journal: power + pause, open: "[power_limit]", thawed: true, log: "tuner restored an original setting"},
		{name: "a pause alone", journal: pause, open: "[]", thawed: true, log: "paused_tenants=embed"},
		{name: "no pause", journal: power, open: "[power_limit]", log: "the tuner is off"},
		{name: "held by another exporter", journal: power + pause, held: true, open: "[pause_duty power_limit]", log: "in use by another process"},
		{name: "the thaw fails", journal: lost, open: "[pause_duty]", log: "tuner could not restore an original setting"},
		{name: "not a file", dir: true, open: "[]", log: "cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "journal")
			if c.dir {
				if err := os.Mkdir(journal, 0o700); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(journal, []byte(c.journal), 0o600); err != nil {
				t.Fatal(err)
			}
			if c.held {
				j, err := tuner.OpenJournal(journal)
				if err != nil {
					t.Fatal(err)
				}
				defer j.Close()
			}
			var buf strings.Builder
			cfg := testConfig(t, "--backend=sim", "--sim.scenario=noisy-neighbour", "--tuner.journal="+journal, "--tuner.mode=off")
			svc, err := buildOn(cfg, gpu.RealClock{}, log.NewLogfmtLogger(log.NewSyncWriter(&buf)))
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			if !strings.Contains(buf.String(), c.log) {
				t.Errorf("no %q in the log:\n%s", c.log, buf.String())
			}
			var open []string
			if !c.dir {
				origs, err := tuner.ReadJournalOriginals(journal)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range origs {
					open = append(open, string(o.Target.Knob))
				}
			}
			slices.Sort(open)
			if got := fmt.Sprint(open); got != c.open {
				t.Errorf("open originals %s after the start, want %s", got, c.open)
			}
			thawed := false
			for _, a := range svc.src.(*sim.Simulator).Actions() {
				thawed = thawed || a.Kind == string(gpu.KnobPauseDuty) && a.Tenant == "embed" && a.Detail == "0.000"
			}
			if thawed != c.thawed {
				t.Errorf("embed thawed: %v, want %v", thawed, c.thawed)
			}
		})
	}
}

// closeTimed is a backend whose Close takes a moment and is noted.
// simTunerService builds the exporter on the simulator's noisy-neighbour,
// sampled and tuned (in recommend) every 100 ms, with args, logging to
// logs, its backend's close timed (src).
func simTunerService(t *testing.T, args ...string) (cfg *config, svc *service, logs *testutil.SyncBuffer, src closeTimed) {
	t.Helper()
	cfg = testConfig(t, append([]string{"--web.listen-address=" + freeAddr(t), "--backend=sim", "--sim.scenario=noisy-neighbour", "--sample.interval=100ms",
		"--tuner.mode=recommend", "--tuner.interval=100ms"}, args...)...)
	logs = &testutil.SyncBuffer{}
	svc, err := buildOn(cfg, gpu.RealClock{}, log.NewLogfmtLogger(logs))
	if err != nil {
		t.Fatal(err)
	}
	src = closeTimed{Source: svc.src, closed: make(chan struct{})}
	svc.src = src
	return cfg, svc, logs, src
}

type closeTimed struct {
	gpu.Source
	closed chan struct{}
}

func (s closeTimed) Close() error {
	err := s.Source.Close()
	time.Sleep(50 * time.Millisecond)
	close(s.closed)
	return err
}

// closerFunc is an actuator closed at exit (Runner.CloseAtExit).
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// A restore that runs past the shutdown's own deadline is waited for,
// and the backend, whose close waits for the restore, is still closed
// before serve returns. (Before, serve returned as soon as the restore
// ended, the deadline being past: the backend was not closed and a
// shutdown "not finished in time" was logged.)
func TestBackendClosedAfterALongRestore(t *testing.T) {
	defer func(d time.Duration) { shutdownTimeout = d }(shutdownTimeout)
	shutdownTimeout = 100 * time.Millisecond
	cfg, svc, logs, src := simTunerService(t)
	var restored atomic.Bool
	svc.tuner.CloseAtExit(closerFunc(func() error { // the restore's last step, past the deadline
		time.Sleep(4 * shutdownTimeout)
		restored.Store(true)
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, cfg, newCollector, make(chan os.Signal)) }()
	waitUntil(t, "the first snapshot", func() bool { return svc.Published() != nil })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not return")
	}
	if !restored.Load() {
		t.Error("serve returned before the restore ended")
	}
	select {
	case <-src.closed:
	default:
		t.Error("serve returned with the backend not closed")
	}
	if s := logs.String(); strings.Contains(s, "did not finish in time") {
		t.Errorf("a shutdown not finished logged: %s", s)
	}
}
