package tuner

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A pause of PIDs 7 and 8 (pod A) whose processes exit, the tenant's new
// process 9 (pod B) appearing and PID 7 taken by an unrelated process in
// another cgroup: the follow journals the cgroups of the processes it
// knows to be the pause's (9, just read; 7 and 8 only where their start
// times are still the journaled ones), never that of the process holding
// PID 7 now. Should the follow's freeze fail and the exporter crash, the
// next start thaws pod A's and pod B's cgroups where they are still
// there, never the unrelated one.
func TestFollowJournalsNoCgroupOfAReusedPID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j := openJournal(t, path)
	pidTakenAfterFailedFollow(t, j)
	j2 := reopen(t, j, path) // crash
	if o := j2.Originals(); len(o) == 1 && slices.Contains(o[0].Cgroups, other) {
		t.Errorf("journal names %v as a cgroup the pause froze; it is the cgroup of the process that took PID 7 (journaled: %v)", other, o[0].Cgroups)
	}
	p2 := &idPause{boot: testBoot, starts: map[uint32]uint64{7: 999, 9: 300}, live: map[string]uint64{other.Path: other.ID, podB.Path: podB.ID}}
	d := recoverWith(t, j2, p2)
	if slices.Contains(p2.thawed, other) {
		t.Errorf("the start thawed %v, a cgroup the tuner never froze (decisions %+v)", other, d)
	}
}

// The same without a crash: the pause ending while the tuner runs (the
// kill switch) after the failed follow thaws no cgroup of a process that
// took a paused PID.
func TestPauseEndThawsNoCgroupOfAReusedPID(t *testing.T) {
	j := writeJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	kill := &KillSwitch{}
	tu, p := pidTakenAfterFailedFollow(t, j, kill)
	p.live = map[string]uint64{other.Path: other.ID, podB.Path: podB.ID}
	kill.Engaged.Store(true)
	if _, err := tu.RunOnce(context.Background(), trainOn(t0.Add(2*time.Second), []uint32{9})); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(p.thawed, other) {
		t.Errorf("the pause's end thawed %v, the cgroup of the process that took PID 7 (calls %q)", other, p.Calls)
	}
}

// Where a widened pause's cgroups exceed what a record holds (4 KiB of
// paths: about 20 Kubernetes containers of the systemd driver, whose
// paths run to 191 bytes), those about to be frozen are journaled before
// those frozen already: should the follow fail and the exporter crash,
// the ones the pause was freezing are thawed at the next start.
func TestWidenedCgroupsKeepTheNewFirst(t *testing.T) {
	ctx := context.Background()
	cg := systemdContainer
	p := &idPause{boot: testBoot, starts: map[uint32]uint64{}, cgroups: map[uint32]gpu.Cgroup{}}
	var old, fresh []uint32
	for pid := uint32(1); pid <= 30; pid++ {
		p.starts[pid], p.cgroups[pid] = uint64(1000+pid), cg(pid)
		if pid <= 21 {
			old = append(old, pid)
		} else {
			fresh = append(fresh, pid)
		}
	}
	j := writeJournal(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the pause, then its follow to the 21 processes
		if _, err := tu.RunOnce(ctx, trainOn(t0.Add(time.Duration(i)*time.Second), old)); err != nil {
			t.Fatal(err)
		}
	}
	if o := j.Originals(); len(o) != 1 || len(o[0].PIDs) != len(old) {
		t.Fatalf("originals %+v, want the pause's of %d processes", o, len(old))
	}
	p.fail = 1 // the next follow's freeze fails: the widened record stands
	if _, err := tu.RunOnce(ctx, trainOn(t0.Add(2*time.Second), append(slices.Clone(old), fresh...))); err != nil {
		t.Fatal(err)
	}
	o := j.Originals()
	if len(o) != 1 {
		t.Fatalf("originals %+v, want the pause's", o)
	}
	for _, pid := range fresh {
		if !slices.Contains(o[0].Cgroups, cg(pid)) {
			t.Fatalf("%d cgroups journaled (PIDs %v, cgroups %v); that of PID %d, being frozen, left out", len(o[0].Cgroups), o[0].PIDs, o[0].Cgroups, pid)
		}
	}
}

// trainOn is a snapshot at at of the batch tenant train on GPU 0 as the
// MPS clients pids.
func trainOn(at time.Time, pids []uint32) *tenant.Snapshot {
	var procs []gpu.Process
	for _, pid := range pids {
		procs = append(procs, mpsProc(pid, nil))
	}
	return snapshot(at, []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: procs}},
		[]tenant.Usage{{Tenant: "train", Class: gpu.ClassBatch, UUID: uuid0, PIDs: pids}})
}

// other is the cgroup of an unrelated process, podB the paused tenant's
// new pod's (pidTakenAfterFailedFollow).
var (
	other = gpu.Cgroup{Path: "/system.slice/backup.service", ID: 77}
	podB  = gpu.Cgroup{Path: "/kubepods/pod2/cri-containerd-cd", ID: 6}
)

// pidTakenAfterFailedFollow runs a tuner journaling to j, with guards
// before Bounds, through a pause of train's PIDs 7 and 8 (pod A), then a
// round in which 7 and 8 have exited, an unrelated process (in other)
// holds PID 7 and train runs as 9 (in podB), whose follow's freeze fails
// (EBUSY, a timeout: the widened record stands). It returns the tuner
// and its pause actuator.
func pidTakenAfterFailedFollow(t *testing.T, j *Journal, guards ...Guard) (*Tuner, *idPause) {
	t.Helper()
	ctx := context.Background()
	p := &idPause{boot: testBoot, starts: map[uint32]uint64{7: 100, 8: 200}, cgroups: map[uint32]gpu.Cgroup{7: podCgroup, 8: podCgroup}}
	tu, err := New(Options{Policy: pauseOnce(), Guards: append(guards, Bounds{}), Enabled: pauseOn, Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tu.RunOnce(ctx, trainOn(t0, []uint32{7, 8})); err != nil {
		t.Fatal(err)
	}
	p.starts = map[uint32]uint64{7: 999, 9: 300}
	p.cgroups = map[uint32]gpu.Cgroup{7: other, 9: podB}
	p.fail = 1
	if _, err := tu.RunOnce(ctx, trainOn(t0.Add(time.Second), []uint32{9})); err != nil {
		t.Fatal(err)
	}
	return tu, p
}
