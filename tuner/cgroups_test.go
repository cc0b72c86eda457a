package tuner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// podCgroup is the cgroup a pause of PIDs 7 and 8 freezes.
var podCgroup = gpu.Cgroup{Path: "/kubepods/pod1/cri-containerd-ab", ID: 5}

// A thaw after a crash of a pause whose processes are all gone (killed
// while frozen) thaws the cgroups journaled with it that are still there
// under the same ID, and says so; one made again under the path (another
// ID), one of another boot, and a pause journaled without them (an
// earlier version) thaw none.
func TestThawAfterCrashThawsTheCgroupsItFroze(t *testing.T) {
	for _, c := range []struct {
		name    string
		boot    string
		cgroups []gpu.Cgroup
		live    uint64 // the ID of the cgroup under its path now
		thawed  bool
	}{
		{"the cgroup it froze", testBoot, []gpu.Cgroup{podCgroup}, podCgroup.ID, true},
		{"the cgroup made again", testBoot, []gpu.Cgroup{podCgroup}, podCgroup.ID + 1, false},
		{"another boot", otherBoot, []gpu.Cgroup{podCgroup}, podCgroup.ID, false},
		{"journaled without (an earlier version)", testBoot, nil, podCgroup.ID, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := crashedJournal(t, Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7},
				Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}, Identity: Identity{Boot: c.boot, Starts: []uint64{100, 200}, Cgroups: c.cgroups}})
			p := &idPause{boot: testBoot, starts: map[uint32]uint64{}, live: map[string]uint64{podCgroup.Path: c.live}}
			d := recoverWith(t, j, p)
			if got := len(p.thawed) > 0; got != c.thawed {
				t.Errorf("cgroups thawed %v, want some: %v", p.thawed, c.thawed)
			}
			if len(d) != 1 || !d[0].Applied || !strings.Contains(d[0].Reason, "process gone") || strings.Contains(d[0].Reason, "the cgroups it froze thawed") != c.thawed {
				t.Errorf("decisions %+v, want the thaw applied, its processes gone, the cgroup thawed: %v", d, c.thawed)
			}
			if n := len(j.Originals()); n != 0 {
				t.Errorf("%d open originals after the thaw, want 0", n)
			}
		})
	}
}

// recoverWith is the recovery an hour after the crash j holds, with the
// pause actuator p.
func recoverWith(t *testing.T, j *Journal, p *idPause) []Decision {
	t.Helper()
	tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0.Add(time.Hour)), Mode: ModeRecommend})
	if err != nil {
		t.Fatal(err)
	}
	d, err := tu.Recover(context.Background(), emptySnap(t0.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The journal takes a pause record's cgroups only with its processes'
// boot, within bounds, each a path below a hierarchy's root with an ID.
func TestJournalValidCgroups(t *testing.T) {
	pause := Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7}
	rec := func(event string, target Target, boot string, cgs ...gpu.Cgroup) Record {
		return Record{Time: t0, Event: event, Target: target, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7},
			Identity: Identity{Boot: boot, Starts: []uint64{1}, Cgroups: cgs}}
	}
	many := make([]gpu.Cgroup, maxJournalCgroups+1)
	for i := range many {
		many[i] = gpu.Cgroup{Path: "/a", ID: uint64(i + 1)}
	}
	for _, c := range []struct {
		name string
		r    Record
		ok   bool
	}{
		{"an original", rec(EventOriginal, pause, testBoot, podCgroup, gpu.Cgroup{V1: true, Path: "/system.slice/a.service", ID: 9}), true},
		{"a processes record", rec(EventProcesses, pause, testBoot, podCgroup), true},
		{"without the boot", Record{Time: t0, Event: EventOriginal, Target: pause, From: encodeValue(Duty(0)), PIDs: []uint32{7}, Identity: Identity{Cgroups: []gpu.Cgroup{podCgroup}}}, false},
		{"another knob", rec(EventOriginal, Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, testBoot, podCgroup), false},
		{"no ID", rec(EventOriginal, pause, testBoot, gpu.Cgroup{Path: "/a"}), false},
		{"the root", rec(EventOriginal, pause, testBoot, gpu.Cgroup{Path: "/", ID: 1}), false},
		{"a relative path", rec(EventOriginal, pause, testBoot, gpu.Cgroup{Path: "a", ID: 1}), false},
		{"a path that climbs", rec(EventOriginal, pause, testBoot, gpu.Cgroup{Path: "/../a", ID: 1}), false},
		{"too many", rec(EventOriginal, pause, testBoot, many...), false},
		{"too long", rec(EventOriginal, pause, testBoot, gpu.Cgroup{Path: "/" + strings.Repeat("a", maxJournalCgroupBytes), ID: 1}), false},
	} {
		if err := validRecord(c.r); (err == nil) != c.ok {
			t.Errorf("%s: validRecord = %v, want ok: %v", c.name, err, c.ok)
		}
	}
}

// A pause whose processes sit in more cgroups than a record holds
// journals as many as it holds and warns, once an hour, how many it left
// out; one whose cgroups fit warns nothing.
func TestPauseWarnsOfCgroupsLeftOut(t *testing.T) {
	for _, c := range []struct {
		name       string
		containers uint32
		kept       int
		warned     bool
	}{
		{"three containers", 3, 3, false},
		{"twenty-one containers", 21, 21, false},
		{"thirty containers", 30, 21, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &idPause{boot: testBoot, starts: map[uint32]uint64{}, cgroups: map[uint32]gpu.Cgroup{}}
			var pids []uint32
			for pid := uint32(1); pid <= c.containers; pid++ {
				p.starts[pid], p.cgroups[pid] = uint64(1000+pid), systemdContainer(pid)
				pids = append(pids, pid)
			}
			j := writeJournal(t, filepath.Join(t.TempDir(), "journal"))
			defer j.Close()
			out := &strings.Builder{}
			tu, err := New(Options{Policy: pauseOnce(), Guards: []Guard{Bounds{}}, Enabled: pauseOn, Actuators: ActuatorsOf(p), Journal: j, Clock: gpu.NewManualClock(t0),
				Mode: ModeEnforce, Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 { // the pause, then rounds that follow nothing new
				if _, err := tu.RunOnce(context.Background(), trainOn(t0.Add(time.Duration(i)*time.Second), pids)); err != nil {
					t.Fatal(err)
				}
			}
			o := j.Originals()
			if len(o) != 1 || len(o[0].Cgroups) != c.kept {
				t.Fatalf("originals %+v, want the pause's with %d cgroups", o, c.kept)
			}
			want := 0
			if c.warned {
				want = 1
			}
			if n := strings.Count(out.String(), fmt.Sprintf("journals %d of the %d cgroups it pauses", c.kept, c.containers)); n != want {
				t.Errorf("%d warnings of the cgroups left out, want %d; log:\n%s", n, want, out)
			}
		})
	}
}

// systemdContainer is the cgroup of container i of a pod under the
// systemd cgroup driver (191 bytes: 21 fit in a record's 4 KiB).
func systemdContainer(i uint32) gpu.Cgroup {
	return gpu.Cgroup{Path: fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%032d.slice/cri-containerd-%064d.scope", i, i), ID: uint64(100 + i)}
}
