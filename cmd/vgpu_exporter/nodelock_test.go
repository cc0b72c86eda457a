package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// startTuner builds the exporter of args on the simulator, its tuner
// started, as the exporter's start does.
func startTuner(t *testing.T, args ...string) (*tuner.Runner, error) {
	t.Helper()
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(t, append([]string{"--backend=sim", "--sim.scenario=noisy-neighbour"}, args...)...)
	svc, err := buildOn(cfg, clock, log.NewNopLogger())
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { svc.src.Close() })
	return svc.tuner, nil
}

// TestNodeLockKeepsASecondTunerOut: two exporters whose journals are in
// different directories (two releases' hostPaths, the systemd unit's
// /var/lib/vgpu_exporter beside the chart's /var/lib/vgpu-exporter) share
// --tuner.node-lock: the second in enforce (by mode or by one GPU's mode)
// does not start, its error naming the lock and the first's journal; one
// in recommend, which changes nothing, starts; the first's restore at exit
// frees the lock, and the second starts then. Before, both enforced on
// the same GPUs.
func TestNodeLockKeepsASecondTunerOut(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "run", "tuner.lock")
	os.Mkdir(filepath.Dir(lock), 0o755)
	journalA, journalB := filepath.Join(dir, "vgpu-exporter", "j.jsonl"), filepath.Join(dir, "vgpu_exporter", "j.jsonl")
	os.MkdirAll(filepath.Dir(journalA), 0o700)
	os.MkdirAll(filepath.Dir(journalB), 0o700)
	first, err := startTuner(t, "--tuner.mode=enforce", "--tuner.journal="+journalA, "--tuner.node-lock="+lock)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC() // the runner keeps the lock's file: no finalizer closes it
	for _, args := range [][]string{
		{"--tuner.mode=enforce", "--tuner.journal=" + journalB},
		{"--tuner.mode=recommend", "--tuner.gpu-mode=0=enforce", "--tuner.journal=" + journalB},
		{"--tuner.mode=enforce"}, // no journal at all: no journal's lock either
	} {
		_, err := startTuner(t, append(args, "--tuner.node-lock="+lock)...)
		if err == nil {
			t.Fatalf("%v: a second tuner in enforce started beside the first", args)
		}
		for _, want := range []string{"--tuner.node-lock: " + lock + " is held by", `journal="` + journalA + `"`, "--tuner.mode=recommend or off"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: error %q lacks %q", args, err, want)
			}
		}
	}
	rec, err := startTuner(t, "--tuner.mode=recommend", "--tuner.journal="+journalB, "--tuner.node-lock="+lock)
	if err != nil {
		t.Fatalf("a tuner in recommend beside one in enforce: %v", err)
	}
	rec.Restore() // its journal's lock
	if err := first.Restore(); err != nil {
		t.Fatal(err)
	}
	second, err := startTuner(t, "--tuner.mode=enforce", "--tuner.journal="+journalB, "--tuner.node-lock="+lock)
	if err != nil {
		t.Fatalf("after the first's exit: %v", err)
	}
	second.Restore()
}

// TestNodeLockPathRefused: a node lock that cannot be created stops the
// start with an error naming the flag and the path, as does one whose
// directory is not there (a mistyped path, whose directory made would be
// a second lock); a relative one is refused at parse (installs would not
// share it), as is one that is the journal or the kill-switch file.
func TestNodeLockPathRefused(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	typo := filepath.Join(t.TempDir(), "vgpu_exporter")
	for lock, want := range map[string]string{
		filepath.Join(notDir, "tuner.lock"): "is not a directory",
		filepath.Join(typo, "tuner.lock"):   "is not there",
	} {
		_, err := startTuner(t, "--tuner.mode=enforce", "--tuner.node-lock="+lock)
		if err == nil || !strings.Contains(err.Error(), "--tuner.node-lock: the directory of "+lock+", "+filepath.Dir(lock)+", "+want) {
			t.Errorf("%s: error %v", lock, err)
		}
	}
	if _, err := os.Lstat(typo); err == nil {
		t.Errorf("%s made", typo)
	}
	if _, err := parseArgs(t, "--tuner.mode=enforce", "--tuner.node-lock=run/tuner.lock"); err == nil || !strings.Contains(err.Error(), `--tuner.node-lock "run/tuner.lock" is not an absolute path`) {
		t.Errorf("relative path: %v", err)
	}
	x := t.TempDir()
	same := filepath.Join(x, "j")
	for _, other := range []string{"--tuner.journal=" + filepath.Join(x, "..", filepath.Base(x), "j"), "--tuner.kill-switch-file=" + same} {
		flag := other[:strings.Index(other, "=")]
		if _, err := parseArgs(t, "--tuner.mode=enforce", "--tuner.node-lock="+same, other); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--tuner.node-lock %q is %s's file", same, flag)) {
			t.Errorf("the lock at %s: %v", other, err)
		}
	}
	if _, err := parseArgs(t, "--tuner.mode=enforce", "--tuner.node-lock="+same, "--tuner.journal="+filepath.Join(x, "k")); err != nil {
		t.Errorf("a lock beside the journal: %v", err)
	}
}

// TestNodeLockInStatus: the tuner's status says whether it holds the node
// lock (its file), or why it takes none, for vgpu_tuner_node_lock_held and
// /tuner: before, only a log line at start said so.
func TestNodeLockInStatus(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "tuner.lock")
	for _, c := range []struct {
		name string
		args []string
		want tuner.NodeLockState
	}{
		{"enforce", []string{"--tuner.mode=enforce", "--tuner.node-lock=" + lock}, tuner.NodeLockState{Path: lock}},
		{"one GPU in enforce", []string{"--tuner.mode=recommend", "--tuner.gpu-mode=0=enforce", "--tuner.node-lock=" + lock}, tuner.NodeLockState{Path: lock}},
		{"recommend", []string{"--tuner.mode=recommend", "--tuner.node-lock=" + lock}, tuner.NodeLockState{NotTaken: tuner.NodeLockNotEnforcing}},
		{"empty flag", []string{"--tuner.mode=enforce", "--tuner.node-lock="}, tuner.NodeLockState{NotTaken: tuner.NodeLockNoFile}},
		{"simulator, not given", []string{"--tuner.mode=enforce"}, tuner.NodeLockState{NotTaken: tuner.NodeLockSimulated}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := startTuner(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Restore()
			if got := r.Status().NodeLock; got != c.want {
				t.Errorf("node lock %+v, want %+v", got, c.want)
			}
		})
	}
}
