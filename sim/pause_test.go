package sim

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

const pauseScenario = `name: pause
gpus: [{model: H100-SXM5-80GB, sharing: SHARING}]
tenants:
  - {name: a, process: {pid: 1}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
  - {name: b, process: {pid: 2}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
`

// A paused tenant's job in flight drains (the effect lags by up to one
// step); it starts no new one until the paused phase ends.
func TestPauseDrainLag(t *testing.T) {
	sc := pauseSc(t, "time-slice")
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	a := s.tenants[0]
	// find a moment when a's step is in flight, part done
	for i := 0; ; i++ {
		s.AdvanceTo(s.Now().Add(7 * time.Millisecond))
		if a.job.active && a.job.rem > 0.2 && a.job.rem < 0.8 {
			break
		}
		if i > 1000 {
			t.Fatal("a's step never seen in flight")
		}
	}
	s.mu.Lock()
	seq, start := a.jobSeq, s.now
	s.mu.Unlock()
	if err := s.SetPauseDuty(ctx, sc.GPUs[0].UUID, "a", []uint32{1}, 0.9); err != nil {
		t.Fatal(err)
	}
	frozenEnd := start + int64(0.9*float64(PausePeriod))
	drained := false
	for now := start; now < frozenEnd; now += int64(time.Millisecond) {
		s.AdvanceTo(s.start.Add(time.Duration(now)))
		if !a.job.active {
			drained = true
		}
		if a.jobSeq > seq {
			t.Fatalf("a new step started %v into the paused phase", time.Duration(now-start))
		}
	}
	if !drained {
		t.Fatal("the step in flight did not finish during the paused phase (a step here is well under 450 ms)")
	}
	s.AdvanceTo(s.start.Add(time.Duration(frozenEnd) + 20*time.Millisecond))
	if a.jobSeq <= seq {
		t.Error("no new step after the paused phase ended")
	}
	acts := s.Actions()
	if len(acts) != 1 || acts[0].Kind != "pause_duty" || acts[0].Lost != 0 || acts[0].Paused != 0 {
		t.Errorf("actions %+v: want one pause_duty, nothing lost", acts)
	}
}

func pauseSc(t *testing.T, sharing string) *Scenario {
	return mustParse(t, strings.Replace(pauseScenario, "SHARING", sharing, 1))
}

// Pausing costs the paused tenant the work it did not do, and its
// neighbour gets the GPU time, time-sliced, under MPS or on a vGPU host
// (the VM paused through its process on the host).
func TestPauseShiftsWork(t *testing.T) {
	for _, sharing := range []string{"time-slice", "mps", "vgpu"} {
		t.Run(sharing, func(t *testing.T) { testPauseShiftsWork(t, sharing) })
	}
}

func testPauseShiftsWork(t *testing.T, sharing string) {
	pidA := uint32(1) // a's process
	if sharing == "vgpu" {
		pidA = pauseSc(t, sharing).Tenants[0].VM.HostPID // a's VM's
		if pidA == 0 {
			t.Fatal("no host process for a's VM")
		}
	}
	run := func(duty float64) (a, b float64) {
		sc := pauseSc(t, sharing)
		s := mustNew(t, sc, Options{})
		if duty > 0 {
			if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "a", []uint32{pidA}, duty); err != nil {
				t.Fatal(err)
			}
		}
		want := []gpu.PauseInForce{{UUID: sc.GPUs[0].UUID, Tenant: "a", Duty: duty}}
		if duty == 0 {
			want = nil
		}
		if got := s.PausesInForce(); !reflect.DeepEqual(got, want) {
			t.Errorf("pauses in force %+v, want %+v", got, want)
		}
		s.AdvanceTo(s.Now().Add(20 * time.Second))
		w := s.Window()
		return w.Tenants[0].Work, w.Tenants[1].Work
	}
	a0, b0 := run(0)
	a1, b1 := run(0.6)
	t.Logf("steps in 20 s: unpaused a %v b %v; a paused 60%%: a %v b %v", a0, b0, a1, b1)
	if !(a1 < a0*0.8) || !(b1 > b0*1.2) {
		t.Errorf("a paused 60%%: a %v steps (unpaused %v), b %v (unpaused %v): want a well down, b well up", a1, a0, b1, b0)
	}
	if a1+b1 < (a0+b0)*0.9 {
		t.Errorf("the GPU lost work: %v steps in all, %v unpaused", a1+b1, a0+b0)
	}
	sc := pauseSc(t, sharing)
	s := mustNew(t, sc, Options{})
	for _, d := range []float64{-0.1, 1} {
		if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "a", []uint32{pidA}, d); err == nil {
			t.Errorf("duty %v accepted", d)
		}
	}
	if err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "x", []uint32{99}, 0.5); err == nil {
		t.Error("a pause of an unknown PID accepted")
	}
	if sharing == "vgpu" {
		// the PID of a process in the VM is the guest's: the host has none
		err := s.SetPauseDuty(context.Background(), sc.GPUs[0].UUID, "a", []uint32{1}, 0.5)
		if err == nil || !strings.Contains(err.Error(), "inside VM vm-a") {
			t.Errorf("a pause by a guest's PID: %v, want refused as inside VM vm-a", err)
		}
	}
}

// A scenario's VM host PIDs: defaults that no process has, a named one
// kept, refused off a vGPU host or when another process has it.
func TestVMHostPID(t *testing.T) {
	sc := mustParse(t, `name: vms
gpus: [{model: H100-SXM5-80GB, sharing: vgpu}]
tenants:
  - {name: a, process: {pid: 300001}, workload: {type: training, flops: 5e13}}
  - {name: b, process: {pid: 7}, vm: {host_pid: 300000}, workload: {type: training, flops: 5e13}}
  - {name: c, process: {pid: 8}, workload: {type: training, flops: 5e13}}
`)
	if got := []uint32{sc.Tenants[0].VM.HostPID, sc.Tenants[1].VM.HostPID, sc.Tenants[2].VM.HostPID}; got[0] != 300002 || got[1] != 300000 || got[2] != 300003 {
		t.Errorf("host PIDs %v, want 300002 (300000 is b's, 300001 a's process), 300000, 300003", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`name: x
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants: [{name: a, vm: {host_pid: 9}, workload: {type: training, flops: 5e13}}]
`, "host_pid needs a GPU with sharing: vgpu"},
		{`name: x
gpus: [{model: H100-SXM5-80GB, sharing: vgpu}]
tenants:
  - {name: a, process: {pid: 9}, workload: {type: training, flops: 5e13}}
  - {name: b, vm: {host_pid: 9}, workload: {type: training, flops: 5e13}}
`, "duplicate PID 9"},
	} {
		if _, err := ParseScenario("x.yaml", []byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// A tenant on two GPUs is paused as a whole, as the host's pause
// actuator pauses it: each GPU's call names all its processes, the duty
// in force is the largest any of its GPUs asks for, on each of them, and
// one GPU's thaw leaves the other's pause in force.
func TestPauseTenantOnTwoGPUs(t *testing.T) {
	sc := mustParse(t, `name: pause-two
gpus: [{model: H100-SXM5-80GB, sharing: time-slice}, {model: H100-SXM5-80GB, sharing: time-slice}]
tenants:
  - {name: a, gpu: 0, process: {pid: 1}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
  - {name: b, gpu: 1, process: {pid: 2}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
`)
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	u0, u1 := sc.GPUs[0].UUID, sc.GPUs[1].UUID
	set := func(uuid string, duty float64) {
		t.Helper()
		if err := s.SetPauseDuty(ctx, uuid, "trainer", []uint32{1, 2}, duty); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want []gpu.PauseInForce, duties ...float64) {
		t.Helper()
		if got := s.PausesInForce(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: pauses in force %+v, want %+v", what, got, want)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, d := range duties {
			if s.tenants[i].duty != d {
				t.Errorf("%s: the trainer's process on GPU %d is paused %v of each period, want %v", what, i, s.tenants[i].duty, d)
			}
		}
	}
	set(u0, 0.3)
	set(u1, 0.2)
	want := []gpu.PauseInForce{{UUID: u0, Tenant: "trainer", Duty: 0.3}, {UUID: u1, Tenant: "trainer", Duty: 0.3}}
	if u1 < u0 {
		want[0], want[1] = want[1], want[0]
	}
	check("both GPUs", want, 0.3, 0.3)
	set(u0, 0)
	check("GPU 0 thawed", []gpu.PauseInForce{{UUID: u1, Tenant: "trainer", Duty: 0.2}}, 0.2, 0.2)
	set(u1, 0)
	check("both thawed", nil, 0, 0)
}
