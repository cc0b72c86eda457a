package tuner

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// widestPause is a pause's original of n processes with the longest
// identity a record takes: PIDs of ten digits, start times at their bound,
// and as many cgroups, of as many bytes of paths, as a record holds.
func widestPause(n int) Original {
	o := Original{Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}, Tenant: strings.Repeat("t", maxJournalText), Value: Duty(0), At: t0,
		Identity: Identity{Boot: testBoot}}
	for i := range n {
		o.PIDs = append(o.PIDs, math.MaxUint32-uint32(i))
		o.Starts = append(o.Starts, maxJournalTicks)
	}
	for i := range maxJournalCgroups {
		p := fmt.Sprintf("/%02d", i)
		o.Cgroups = append(o.Cgroups, gpu.Cgroup{V1: true, Path: p + strings.Repeat("c", maxJournalCgroupBytes/maxJournalCgroups-len(p)), ID: math.MaxUint64 - uint64(i)})
	}
	return o
}

// A pause of as many processes as a record names (8 ranks of 100
// data-loader workers and more), each with its identity, and its cgroups
// is journaled, original and processes record, and read back whole.
func TestJournalHoldsTheWidestPause(t *testing.T) {
	o := widestPause(4096)
	if cgroupBytes(o.Cgroups) != maxJournalCgroupBytes {
		t.Fatalf("%d bytes of cgroups, want %d", cgroupBytes(o.Cgroups), maxJournalCgroupBytes)
	}
	first := Original{Target: o.Target, Tenant: o.Tenant, Value: Duty(0), At: t0, PIDs: []uint32{1}}
	procs := Record{Time: t0, Event: EventProcesses, Target: o.Target, Tenant: o.Tenant, PIDs: o.PIDs, Identity: o.Identity}
	o900 := widestPause(900)
	for _, c := range []struct {
		name string
		recs []Record
		want Original
	}{
		{"original of 900", []Record{originalRecord(o900)}, o900},
		{"original of 4096", []Record{originalRecord(o)}, o},
		{"processes of 4096", []Record{originalRecord(first), procs}, o},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, path)
			for _, r := range c.recs {
				if err := j.Append(r); err != nil {
					t.Fatalf("%s record of %d processes: %v", r.Event, len(r.PIDs), err)
				}
			}
			j2 := reopen(t, j, path)
			origs := j2.Originals()
			if len(origs) != 1 || !slices.Equal(origs[0].PIDs, c.want.PIDs) || !slices.Equal(origs[0].Starts, c.want.Starts) || !slices.Equal(origs[0].Cgroups, c.want.Cgroups) {
				t.Fatalf("read back %d originals, want the pause of %d processes with their start times and %d cgroups", len(origs), len(c.want.PIDs), len(c.want.Cgroups))
			}
			if s := j2.Stats(); len(s.Dropped) > 0 {
				t.Errorf("dropped %v", s.Dropped)
			}
		})
	}
}

// oldPauseLine is a pause's original as the journal wrote it before its
// bound grew (with its processes' identity and cgroup): still read, and
// still thawed.
const oldPauseLine = `J1 0000011c efbff6e1 {"time":"2025-01-02T03:04:05Z","event":"original","target":{"gpu":"GPU-0","knob":"pause_duty","pid":7},"tenant":"train","from":{"kind":"duty"},"pids":[7,8],"boot":"0b6f5a3e-3c1d-4a7e-9b2f-5d8c7e6a1f00","starts":[100,200],"cgroups":[{"path":"/kubepods/pod1/cri-containerd-ab","id":5}]}` + "\n"

func TestJournalReadsAnEarlierPauseRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(path, []byte(oldPauseLine), 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, path)
	defer j.Close()
	origs := j.Originals()
	if len(origs) != 1 || origs[0].Tenant != "train" || !slices.Equal(origs[0].PIDs, []uint32{7, 8}) || origs[0].Boot != testBoot ||
		!slices.Equal(origs[0].Starts, []uint64{100, 200}) || !slices.Equal(origs[0].Cgroups, []gpu.Cgroup{podCgroup}) {
		t.Fatalf("originals %+v, want train's pause of [7 8] with its identity and cgroup", origs)
	}
	p := &idPause{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 200}}
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeRecommend})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(context.Background(), emptySnap(t0)); err != nil {
		t.Fatal(err)
	}
	if n := len(j.Originals()); n != 0 {
		t.Errorf("%d open originals after the thaw at start, want 0", n)
	}
}

// A pause of a tenant with more processes than a record names is not
// made, and its decision (logged, and shown on /tuner) names the tenant,
// how many processes and the bound; the journal is not taken for broken
// (another tenant's pause on another GPU in the same round is made). One
// of as many as a record names is made.
func TestPauseOfTooManyProcessesNamesTenantCountAndBound(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int
		paused bool
	}{
		{"4096 processes", 4096, true},
		{"past the bound", maxJournalPIDs + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			big := pauseAction("train", gpu.ClassBatch, 0, 0.5)
			big.PIDs = nil
			for i := range c.n {
				big.PIDs = append(big.PIDs, uint32(1000+i))
			}
			small := pauseAction("eval", gpu.ClassBatch, 0, 0.5)
			small.Target.GPU, small.Target.PID, small.PIDs = "GPU-1", 9, []uint32{9}
			var buf bytes.Buffer
			rec := &pauseRecorder{}
			j := openJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			tu, err := New(Options{Policy: fixed{big, small}, Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(rec), Journal: j,
				Clock: gpu.NewManualClock(t0), Mode: ModeEnforce, Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
			if err != nil {
				t.Fatal(err)
			}
			snap := emptySnap(t0)
			snap.Readings.Devices = append(snap.Readings.Devices, gpu.Device{UUID: "GPU-1", Index: 1, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(9, nil)}})
			if _, err := tu.RunOnce(context.Background(), snap); err != nil {
				t.Fatal(err)
			}
			var got Decision
			for _, d := range tu.Status().Recent { // (as /tuner shows them)
				if d.Tenant == "train" {
					got = d
				}
			}
			if got.Applied != c.paused {
				t.Fatalf("train's pause of %d processes applied %v, want %v (%+v)", c.n, got.Applied, c.paused, got)
			}
			if !slices.ContainsFunc(rec.Calls, func(s string) bool { return strings.Contains(s, ",eval,") }) {
				t.Errorf("calls %q, want eval paused all the same", rec.Calls)
			}
			if c.paused {
				return
			}
			for _, w := range []string{`tenant "train"`, fmt.Sprintf("%d processes", c.n), fmt.Sprintf("the %d", maxJournalPIDs)} {
				if !strings.Contains(got.Reason, w) {
					t.Errorf("reason %q does not name %s", got.Reason, w)
				}
				if !strings.Contains(buf.String(), strings.ReplaceAll(w, `"`, `\"`)) {
					t.Errorf("log %q does not name %s", buf.String(), w)
				}
			}
			if s := tu.Status(); s.Counts.JournalErrors != 0 {
				t.Errorf("%d journal errors counted, want 0 (the journal is not at fault)", s.Counts.JournalErrors)
			}
		})
	}
}
