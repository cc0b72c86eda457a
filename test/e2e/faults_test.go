//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

// faultRuns is how many runs TestFaultInjection makes; FAULT_RUNS in the
// environment overrides it (make test keeps it small; the documented
// figure is from 200).
var (
	faultRuns = flag.Int("fault.runs", 8, "runs of TestFaultInjection (env FAULT_RUNS overrides)")
	faultSeed = flag.Uint64("fault.seed", 0, "seed of TestFaultInjection's faults; 0: from the clock")
)

// The faults of one run.
const (
	faultKill      = "kill -9"
	faultTerm      = "SIGTERM"
	faultTermKill  = "SIGTERM, then kill -9 during the restore"
	faultTear      = "kill -9, then a torn journal"
	faultDiskFull  = "full disk, then SIGTERM"
	faultDiskKill  = "full disk, then kill -9"
	faultHangTerm  = "hung client restart, then SIGTERM"
	faultHangKill  = "hung client restart, then kill -9"
	faultFinalTerm = "none (final run), SIGTERM"
)

var faults = []string{faultKill, faultTerm, faultTermKill, faultTear, faultDiskFull, faultDiskKill, faultHangTerm, faultHangKill}

// TestFaultInjection runs the exporter (the real binary) in enforce mode
// on the simulator, with a policy that changes the MPS clients' settings
// at its first round, and ends each run with a fault at a random point:
// kill -9, SIGTERM, SIGTERM then kill -9 during the restore, a torn
// journal, a full disk (the journal on a tiny tmpfs, or a file size limit
// without root), a client restart that hangs. The simulated GPU keeps its
// settings in a file across runs (--sim.settings-file), as a real GPU
// does, so that a run killed with a setting changed leaves it changed for
// the next one. Every start must succeed (the exporter serves), every
// SIGTERM must exit 0 with no setting left changed, and after the last run
// (a clean one) no setting is left changed.
func TestFaultInjection(t *testing.T) {
	runs := *faultRuns
	if s := os.Getenv("FAULT_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("FAULT_RUNS=%q: %v", s, err)
		}
		runs = n
	}
	seed := *faultSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("%d runs, seed %d (-fault.seed to replay)", runs, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	bin := buildExporter(t)
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	disk := newSmallDisk(t, filepath.Join(dir, "disk"))
	journal := filepath.Join(disk.dir, "journal")

	checked, counts, seen := 0, map[string]int{}, map[string]int{}
	for i := 0; i <= runs; i++ {
		fault := faults[rng.IntN(len(faults))]
		if i == runs {
			fault = faultFinalTerm
		}
		counts[fault]++
		r := faultRun{t: t, i: i, fault: fault, bin: bin, journal: journal, settings: settings, disk: disk, rng: rng}
		if !r.run() {
			t.Fatalf("run %d (%s) failed; its log:\n%s", i, fault, r.p.logs())
		}
		if fault == faultTerm || fault == faultDiskFull || fault == faultHangTerm || fault == faultFinalTerm {
			checked += r.checkNothingLeft()
		}
		if t.Failed() {
			t.Fatalf("run %d (%s); its log:\n%s", i, fault, r.p.logs())
		}
		r.count(seen)
	}
	t.Logf("%d runs (%v), every start served, %d settings read back from the simulated GPUs after the SIGTERM runs: none left changed", runs+1, counts, checked)
	t.Logf("runs whose log says: %v", seen)
}

// faultRun is one run of the exporter and its fault.
type faultRun struct {
	t                      *testing.T
	i                      int
	fault                  string
	bin, journal, settings string
	disk                   *smallDisk
	rng                    *rand.Rand
	p                      *process
}

// run starts the exporter, waits until it serves, lets it run for a random
// time, applies the fault and waits for the exit; false when the start did
// not succeed.
func (r *faultRun) run() bool {
	t := r.t
	addr := freeAddr(t)
	// The built-in scenario by name: it is read from the binary, so the
	// file size limit of a full disk does not stop the start.
	args := []string{"--backend=sim", "--sim.scenario=noisy-neighbour", "--sim.settings-file=" + r.settings,
		"--tuner.mode=enforce", "--tuner.policy=static-equal", "--tuner.interval=200ms", "--sample.interval=100ms",
		"--tuner.journal=" + r.journal, "--web.listen-address=" + addr}
	bin := r.bin
	full := r.fault == faultDiskFull || r.fault == faultDiskKill
	if full {
		bin, args = r.disk.fill(t, r.rng, bin, args)
		defer r.disk.empty(t)
	}
	hang := r.settings + ".hang"
	if r.fault == faultHangTerm || r.fault == faultHangKill {
		writeFile(t, hang, fmt.Sprintf("%dms", 500+r.rng.IntN(4000)))
		defer os.Remove(hang)
	}
	r.p = startPiped(t, fmt.Sprintf("run-%03d", r.i), bin, args...)
	if !r.waitReady(addr) {
		return false
	}
	time.Sleep(time.Duration(r.rng.IntN(2000)) * time.Millisecond)
	switch r.fault {
	case faultKill, faultTear, faultDiskKill, faultHangKill:
		_ = r.p.cmd.Process.Kill()
		r.wait(5 * time.Second)
		if r.fault == faultTear {
			r.tear()
		}
	case faultTermKill:
		_ = r.p.cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Millisecond)
		_ = r.p.cmd.Process.Kill()
		r.wait(5 * time.Second)
	default:
		_ = r.p.cmd.Process.Signal(syscall.SIGTERM)
		r.wait(45 * time.Second)
		if r.p.err != nil {
			t.Errorf("run %d (%s): exit %v, want 0", r.i, r.fault, r.p.err)
		}
	}
	return true
}

// logSigns are what the runs' logs are searched for, to show which faults
// took effect.
var logSigns = map[string]string{
	"restored at start":          "restored at start (left open in the journal",
	"torn tail cut":              "cut off a torn last record",
	"journal write failed":       "tuner journal write failed",
	"restored at exit":           `reason="restored at exit"`,
	"not restored at exit":       "original settings NOT restored",
	"compaction failed at start": "tuner journal cannot be written",
}

// count adds the signs the run's log shows to seen.
func (r *faultRun) count(seen map[string]int) {
	b, err := os.ReadFile(r.p.logPath)
	if err != nil {
		return
	}
	for name, sign := range logSigns {
		if sign != "" && bytes.Contains(b, []byte(sign)) {
			seen[name]++
		}
	}
}

// startPiped is start with the output through a pipe: the file size limit
// of a full disk then holds the journal, not the log. Its log is the fault
// test's to read; a failure does not show it.
func startPiped(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	return launch(t, name, bin, true, args...)
}

// waitReady waits until the exporter serves /metrics, or it exits.
func (r *faultRun) waitReady(addr string) bool {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-r.p.done:
			r.t.Errorf("run %d (%s): the exporter exited at start: %v", r.i, r.fault, r.p.err)
			return false
		default:
		}
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Errorf("run %d (%s): the exporter did not serve within 15s", r.i, r.fault)
	return false
}

func (r *faultRun) wait(d time.Duration) {
	select {
	case <-r.p.done:
	case <-time.After(d):
		r.t.Fatalf("run %d (%s): the exporter did not exit within %v", r.i, r.fault, d)
	}
}

// tear cuts the journal inside its last record, as a crash during a write
// leaves it.
func (r *faultRun) tear() {
	b, err := os.ReadFile(r.journal)
	if err != nil || len(b) < 2 {
		return
	}
	last := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	cut := last + 1 + r.rng.IntN(len(b)-last-1)
	if err := os.Truncate(r.journal, int64(cut)); err != nil {
		r.t.Fatal(err)
	}
}

// checkNothingLeft reads the simulated GPU settings back (the file the
// simulator keeps them in) and fails the test for any left changed; it
// returns how many settings it read.
func (r *faultRun) checkNothingLeft() int {
	set, err := sim.ReadPersisted(r.settings)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, s := range sim.Leftovers(set) {
		r.t.Errorf("run %d (%s): %s/%s/%d left at %+v, was %+v", r.i, r.fault, s.GPU, s.Knob, s.PID, s.Current, s.Initial)
	}
	return len(set)
}

// smallDisk is where the journal lives: a 64 KiB tmpfs when the test may
// mount one (root), else a plain directory. A run with a full disk fills
// the tmpfs up and starts the exporter under a file size limit (prlimit
// --fsize) of a few hundred bytes: the tmpfs refuses new pages (the
// compaction's file), the limit the journal's growth.
type smallDisk struct {
	dir     string
	tmpfs   bool
	prlimit bool
	filler  string
}

func newSmallDisk(t *testing.T, dir string) *smallDisk {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &smallDisk{dir: dir, filler: filepath.Join(dir, "filler")}
	if os.Geteuid() == 0 && exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).Run() == nil {
		d.tmpfs = true
		t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	}
	_, err := exec.LookPath("prlimit")
	d.prlimit = err == nil
	if !d.tmpfs && !d.prlimit {
		t.Skip("neither a tmpfs (root) nor prlimit to fill the disk with")
	}
	t.Logf("full disk: tmpfs %v, file size limit %v", d.tmpfs, d.prlimit)
	return d
}

// fill leaves a few hundred bytes for the journal.
func (d *smallDisk) fill(t *testing.T, rng *rand.Rand, bin string, args []string) (string, []string) {
	room := int64(rng.IntN(800))
	if d.tmpfs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d.dir, &st); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(d.filler)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// Every free page taken.
		_, err = f.Write(make([]byte, int64(st.Bavail)*int64(st.Bsize)))
		for err == nil {
			_, err = f.Write(make([]byte, 512))
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatal(err)
		}
	}
	if !d.prlimit {
		return bin, args
	}
	// Two originals compacted take about 460 bytes, the settings file
	// under 400: a limit of 512 bytes and the room leaves a record or
	// two before the journal's writes fail.
	return "prlimit", append([]string{"--fsize=" + strconv.FormatInt(512+room, 10), "--", bin}, args...)
}

func (d *smallDisk) empty(t *testing.T) {
	if err := os.Remove(d.filler); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}
