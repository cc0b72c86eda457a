package main

import (
	"context"
	"html"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// logUntil is a log writer that cancels its context once the log holds
// until.
type logUntil struct {
	mu     sync.Mutex
	b      strings.Builder
	until  string
	cancel context.CancelFunc
}

func (l *logUntil) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if strings.Contains(l.b.String(), l.until) {
		l.cancel()
	}
	return len(p), nil
}

func (l *logUntil) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLog runs the exporter with args until it listens and returns its log.
func startLog(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &logUntil{until: `msg="Listening on"`, cancel: cancel}
	app := kingpin.New("vgpu_exporter", "")
	app.Terminate(nil)
	var stdout strings.Builder
	if code := run(ctx, app, args, &stdout, w); code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, w)
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("%v: not listening within a minute\n%s", args, w)
	}
	return w.String()
}

// The first log lines say what is served where (address, backend,
// scenario, tuner mode as flagged, pages); the knobs the tuner drives are one line;
// the journal is warned about only where a crash can leave a setting
// changed: not on the simulator without --sim.settings-file.
func TestStartLogSaysWhatIsServed(t *testing.T) {
	const addr = "127.0.0.1:0"
	for _, tc := range []struct {
		name        string
		args        []string
		mode        string
		journalWarn bool // the warning that originals are lost at a crash
		journalInfo bool // the line saying no journal is needed
	}{
		{name: "recommend", args: []string{"--tuner.mode=recommend"}, mode: "recommend"},
		{name: "enforce, simulated settings end with the process", args: []string{"--tuner.mode=enforce"}, mode: "enforce", journalInfo: true},
		{name: "enforce, one GPU", args: []string{"--tuner.mode=recommend", "--tuner.gpu-mode=0=enforce"}, mode: `"enforce on GPU 0, recommend elsewhere (as flagged)"`, journalInfo: true},
		{name: "enforce on one GPU, off elsewhere", args: []string{"--tuner.gpu-mode=0=enforce"}, mode: `"enforce on GPU 0, off elsewhere (as flagged)"`, journalInfo: true},
		{name: "enforce, simulated settings kept in a file", args: []string{"--tuner.mode=enforce", "--sim.settings-file=" + filepath.Join(t.TempDir(), "settings.json")},
			mode: "enforce", journalWarn: true},
		{name: "enforce with a journal", args: []string{"--tuner.mode=enforce", "--tuner.journal=" + filepath.Join(t.TempDir(), "journal")}, mode: "enforce"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := startLog(t, append([]string{"--backend=sim", "--web.listen-address=" + addr}, tc.args...)...)
			lines := strings.Split(log, "\n")
			serving := -1
			for i, l := range lines {
				if strings.Contains(l, "msg=serving ") {
					serving = i
					break
				}
			}
			const first = 8
			if serving < 0 || serving >= first {
				t.Fatalf("the serving line is line %d, want one of the first %d:\n%s", serving+1, first, log)
			}
			for _, want := range []string{"address=" + addr, "backend=sim", "tuner_mode=" + tc.mode, "simulated_scenario=h100-timeslice",
				"landing_page=http://" + addr + "/ ", "metrics=http://" + addr + "/metrics", "tuner_page=http://" + addr + "/tuner"} {
				if !strings.Contains(lines[serving], want) {
					t.Errorf("serving line %q lacks %q", lines[serving], want)
				}
			}
			if strings.Contains(log, `msg="tuner actuator"`) || !strings.Contains(log, `knobs="sim: compute_timeslice `) {
				t.Errorf("the knobs are not one line of the tuner's start:\n%s", log)
			}
			warned := hasLine(lines, "level=warn", `msg="tuner in enforce mode without --tuner.journal`)
			informed := hasLine(lines, "level=info", "without --tuner.journal: none is needed here")
			if warned != tc.journalWarn || informed != tc.journalInfo {
				t.Errorf("journal warning %v, no-journal-needed line %v; want %v, %v:\n%s", warned, informed, tc.journalWarn, tc.journalInfo, log)
			}
		})
	}
}

// The landing page says the mode the tuner applies to each GPU once the
// GPUs are read, not the flags': a GPU named by its index and by its UUID
// in two modes runs the safer one; a --tuner.gpu-mode key that names no
// GPU applies to none, and is said to; with every GPU named, nothing is
// "elsewhere". Before the first snapshot it says the flags', as such.
// (Before, it said the flags' throughout, as if applied: "enforce on GPU
// 0, off elsewhere" in the first case and the last.)
func TestLandingSaysAppliedTunerModes(t *testing.T) {
	sc, _, err := resolveScenario("noisy-neighbour") // one GPU
	if err != nil {
		t.Fatal(err)
	}
	uuid := sc.GPUs[0].UUID
	for _, tc := range []struct {
		name      string
		args      []string
		before    string // before the first snapshot
		want      string // once the GPUs are read
		wantsText string // what the page says the tuner does there
		killed    bool   // the kill switch engaged
	}{
		{"GPU 0 named twice, in enforce and off", []string{"--tuner.gpu-mode=0=enforce", "--tuner.gpu-mode=" + uuid + "=off"},
			"enforce on GPU 0, off elsewhere (as flagged)", "off", "the tuner runs and changes nothing on any GPU", false},
		{"a key naming no GPU", []string{"--tuner.gpu-mode=7=enforce"},
			"enforce on GPU 7, off elsewhere (as flagged)", "off; GPU 7: no such GPU", "the tuner runs and changes nothing on any GPU", false},
		{"every GPU named", []string{"--tuner.gpu-mode=0=enforce"},
			"enforce on GPU 0, off elsewhere (as flagged)", "enforce", "the tuner changes the GPUs' settings and restores them at exit", false},
		{"every GPU named, the kill switch engaged", []string{"--tuner.gpu-mode=0=enforce"},
			"enforce on GPU 0, off elsewhere (as flagged)", "enforce", "kill switch on: the tuner changes nothing (reverts excepted)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.killed {
				file := filepath.Join(t.TempDir(), "stop")
				if err := os.WriteFile(file, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--tuner.kill-switch-file="+file)
			}
			cfg := testConfig(t, append([]string{"--web.listen-address=" + freeAddr(t), "--backend=sim", "--sim.scenario=noisy-neighbour",
				"--sample.interval=100ms", "--tuner.mode=off", "--tuner.interval=100ms"}, args...)...)
			svc, err := buildOn(cfg, gpu.RealClock{}, log.NewNopLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.src.Close()
			if got := svc.about(cfg).TunerModes(); got != tc.before {
				t.Errorf("before the first snapshot: %q, want %q", got, tc.before)
			}
			ctx, cancel := context.WithCancel(context.Background())
			wait := svc.Start(ctx)
			defer wait()
			defer cancel()
			waitUntil(t, "the first snapshot", func() bool { return svc.Published() != nil })
			if tc.killed {
				waitUntil(t, "a round at the kill switch", func() bool { st := svc.tunerStatus(); return st != nil && st.KillSwitch })
			}
			h, err := webui.NewLanding(webui.LandingOptions{About: func() webui.About { return svc.about(cfg) }})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if row := "<td>Tuner mode</td><td>" + html.EscapeString(tc.want) + ": " + tc.wantsText; !strings.Contains(rec.Body.String(), row) {
				t.Errorf("the landing page's tuner mode is not\n%s\nin\n%s", row, rec.Body.String())
			}
		})
	}
}

// hasLine says whether one of lines holds every part.
func hasLine(lines []string, parts ...string) bool {
	for _, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
