package tenant

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// mpsDevice is an MPS GPU at second sec (100 J/s, SM activity sm, a
// context-switch counter at 1000/s) with processes procs.
func mpsDevice(sec int64, sm float64, procs ...gpu.Process) *gpu.Readings {
	r := wholeDevice(sec, sm, procs...)
	r.Devices[0].Mode = gpu.SharingMPS
	cs := uint64(1000 * sec)
	r.Devices[0].ContextSwitchesTotal = &cs
	return r
}

// mpsClient is an MPS client (read from the MPS clients' list).
func mpsClient(pid uint32, name string, busy, threads float64) gpu.Process {
	p := wholeProc(pid, name, busy, 10*gib)
	p.Type, p.MPSActiveThreads = gpu.ProcessMPS, gpu.Float(threads)
	return p
}

func sumSM(s *Snapshot) float64 {
	var sum float64
	for _, u := range s.Usage {
		if u.SMActive != nil {
			sum += *u.SMActive
		}
	}
	return sum
}

// TestReadNewcomerSharesWhileListRefused: a tenant read while the compute
// list is refused (an MPS client, whose list NVML answered) that was not
// there at the sample before got no SM share at all: the carried tenant's
// part of the sample before was the whole GPU, which left nothing. A
// tenant read now gets what its own samples allow, weighed against the
// carried parts, and the shares still add up to the GPU's.
func TestReadNewcomerSharesWhileListRefused(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	b.Build(mpsDevice(100, 0.6, wholeProc(1, "vllm", 0.4, 20*gib)), gpu.SamplerStats{})
	var s *Snapshot
	for sec := int64(101); sec <= 103; sec++ {
		r := mpsDevice(sec, 0.6, mpsClient(2, "train", 0.9, 0.5))
		r.Devices[0].ProcessesUnread = true // compute list refused, MPS clients' read
		s = b.Build(r, gpu.SamplerStats{})
	}
	got := usageIn(s, "")
	chat, batch := got["chat"], got["batch"]
	t.Logf("sum of SM shares %.3f (GPU 0.6); chat SM %v, batch SM %v kernel-busy %v, batch cs %v, batch energy %v",
		sumSM(s), deref(chat.SMActive), deref(batch.SMActive), deref(batch.KernelBusy), deref(batch.ContextSwitchesTotal), meterOf(s, "batch").EnergyJoules)
	if batch.SMActive == nil || *batch.SMActive <= 0 {
		t.Errorf("batch, read with a kernel busy 90%% of each interval, has SM share %v: the carried chat took the whole GPU", deref(batch.SMActive))
	}
	if chat.SMActive == nil || *chat.SMActive <= 0 {
		t.Errorf("chat, carried forward, has SM share %v", deref(chat.SMActive))
	}
	if sum := sumSM(s); math.Abs(sum-0.6) > 1e-9 {
		t.Errorf("the tenants' SM shares add up to %v, not the GPU's 0.6", sum)
	}
}

// TestProcessCarriedOnlyWhereItsListRefused: a process of the sample
// before is carried forward only where the list that would hold it (an
// MPS client's: the MPS clients'; any other's: the compute list) is
// refused. An MPS client missing from an MPS list NVML did answer is
// known gone (as the tuner takes it): its tenant was carried all the
// same, with its share, its MPS reservation and its process, for as long
// as the compute list stayed refused. Now it has left: in the interval it
// left, its part of the sample before is unassigned's (as a departed
// process's part is), and it is not served after.
func TestProcessCarriedOnlyWhereItsListRefused(t *testing.T) {
	cases := []struct {
		name                     string
		computeUnread, mpsUnread bool
		want                     map[string]int // tenant: processes; absent: not served
		left                     bool           // a tenant left: unassigned has its part in the first interval
	}{
		{"compute list refused: the MPS client gone", true, false, map[string]int{"chat": 1}, true},
		{"MPS list refused: the compute process gone", false, true, map[string]int{"batch": 1}, true},
		{"both refused", true, true, map[string]int{"chat": 1, "batch": 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			b.Build(mpsDevice(100, 0.6, wholeProc(1, "vllm", 0.4, 20*gib), mpsClient(2, "train", 0.2, 0.5)), gpu.SamplerStats{})
			var s *Snapshot
			for sec := int64(101); sec <= 200; sec++ { // 100 samples, neither list holding a process
				r := mpsDevice(sec, 0.6)
				r.Devices[0].ProcessesUnread, r.Devices[0].MPSProcessesUnread = tc.computeUnread, tc.mpsUnread
				s = b.Build(r, gpu.SamplerStats{})
				if sec == 101 {
					u, ok := usageIn(s, "")[Unassigned]
					if ok != tc.left || ok && (u.SMActive == nil || *u.SMActive <= 0) {
						t.Errorf("in the interval a tenant left (%v), unassigned's SM %v", tc.left, deref(u.SMActive))
					}
				}
			}
			got := usageIn(s, "")
			for _, tn := range []string{"chat", "batch"} {
				u, ok := got[tn]
				want, served := tc.want[tn]
				switch {
				case ok && !served:
					t.Errorf("%s, its only process gone from a list that was read 100 samples ago, still served: %d processes, SM %v, reservation %v, PIDs %v, energy %v J",
						tn, u.Processes, deref(u.SMActive), deref(u.Reservation), u.PIDs, meterOf(s, tn).EnergyJoules)
				case !ok && served:
					t.Errorf("%s, its list refused, not carried forward", tn)
				case ok && u.Processes != want:
					t.Errorf("%s carried with %d processes, want %d", tn, u.Processes, want)
				}
			}
			if sum := sumSM(s); math.Abs(sum-0.6) > 1e-9 {
				t.Errorf("the tenants' SM shares add up to %v, not the GPU's 0.6", sum)
			}
		})
	}
}

// TestMPSListRefusedCarriesClients: on an MPS GPU the MPS clients' list
// refused (the compute list read) is a refused list as well: the tenants
// of its clients are not known to have left. They were dropped, and
// their activity and energy went to unassigned as if the GPU had emptied.
// Now they are carried forward with their processes and reservations.
func TestMPSListRefusedCarriesClients(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	b.Build(mpsDevice(100, 0.6, mpsClient(2, "vllm", 0.4, 0.5)), gpu.SamplerStats{})
	var s *Snapshot
	for sec := int64(101); sec <= 103; sec++ {
		r := mpsDevice(sec, 0.6) // compute list read (no client in it); MPS list refused
		r.Devices[0].MPSProcessesUnread = true
		s = b.Build(r, gpu.SamplerStats{})
	}
	got := usageIn(s, "")
	chat, ok := got["chat"]
	if !ok {
		m := meterOf(s, Unassigned)
		var e float64
		if m != nil {
			e = m.EnergyJoules
		}
		t.Fatalf("chat (an MPS client, its list refused) dropped; unassigned SM %v, unassigned energy %v J", deref(got[Unassigned].SMActive), e)
	}
	if chat.Processes != 1 || deref(chat.SMActive) != 0.6 || deref(chat.Reservation) != 0.5 || chat.Method != Apportioned {
		t.Errorf("chat carried with %d processes, SM %v, reservation %v, %s; want 1, 0.6, 0.5, apportioned",
			chat.Processes, deref(chat.SMActive), deref(chat.Reservation), chat.Method)
	}
	if _, ok := got[Unassigned]; ok {
		t.Errorf("unassigned served while chat is carried: SM %v", deref(got[Unassigned].SMActive))
	}
}

// TestRemovedTenantNotCarriedAfterReload: a reload that removes a tenant
// drops its context-switch count at once (docs/metrics.md). While a
// whole GPU's (or MIG instance's) list was refused the removed tenant was
// carried forward under its old name, its series back and, on a whole
// GPU, its counter counting again.
func TestRemovedTenantNotCarriedAfterReload(t *testing.T) {
	cases := []struct {
		name    string
		gi      string
		before  func(sec int64) *gpu.Readings
		refused func(sec int64) *gpu.Readings
	}{
		{"whole GPU", "",
			func(sec int64) *gpu.Readings {
				return mpsDevice(sec, 0.6, wholeProc(1, "vllm", 0.4, 20*gib), wholeProc(2, "train", 0.2, 10*gib))
			},
			func(sec int64) *gpu.Readings {
				r := mpsDevice(sec, 0.6)
				r.Devices[0].ProcessesUnread = true
				return r
			}},
		{"MIG instance", "1",
			func(sec int64) *gpu.Readings {
				return migDevice(sec, 0.6, 0, migProc(1, "vllm", 1, 20*gib), migProc(2, "train", 1, 10*gib))
			},
			func(sec int64) *gpu.Readings {
				r := migDevice(sec, 0.6, 0)
				r.Devices[0].ProcessesUnread, r.Devices[0].MIG[0].ProcessesUnread = true, true
				return r
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, file := fileBuilder(t, memTenants, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(0, 0))})
			b.Build(tc.before(100), gpu.SamplerStats{})
			b.Build(tc.before(101), gpu.SamplerStats{})
			if err := os.WriteFile(file, []byte(strings.Replace(memTenants, "name: batch", "name: training", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := b.Reload(file); err != nil {
				t.Fatal(err)
			}
			var s *Snapshot
			for sec := int64(102); sec <= 104; sec++ {
				s = b.Build(tc.refused(sec), gpu.SamplerStats{})
			}
			got := usageIn(s, tc.gi)
			if u, ok := got["batch"]; ok {
				t.Errorf("tenant batch, removed by the reload, served after it: SM %v, context switches %v, energy %v J",
					deref(u.SMActive), deref(u.ContextSwitchesTotal), meterOf(s, "batch").EnergyJoules)
			}
			if u := got["chat"]; deref(u.SMActive) != 0.6 {
				t.Errorf("chat, the one tenant of the file left carried, has SM %v, want 0.6", deref(u.SMActive))
			}
		})
	}
}

// TestCarryBoundedByDepartedRetention: a refused process list carried
// its tenants forward for as long as it stayed refused. Now it carries
// them for --tenants.departed-retention (10 s here) at most, counted from
// the first sample that refused it; after that the GPU's (or MIG
// instance's) activity is unassigned's, apportioned, and its tenants'
// meters age as those of tenants that left.
func TestCarryBoundedByDepartedRetention(t *testing.T) {
	cases := []struct {
		name    string
		gi      string
		before  func(sec int64) *gpu.Readings
		refused func(sec int64) *gpu.Readings
	}{
		{"whole GPU", "",
			func(sec int64) *gpu.Readings { return wholeDevice(sec, 0.6, wholeProc(1, "vllm", 0.4, 20*gib)) },
			func(sec int64) *gpu.Readings { return refused(wholeDevice(sec, 0.6)) }},
		{"MIG instance", "1",
			func(sec int64) *gpu.Readings { return migDevice(sec, 0.6, 0, migProc(1, "vllm", 1, 20*gib)) },
			func(sec int64) *gpu.Readings {
				r := migDevice(sec, 0.6, 0)
				r.Devices[0].ProcessesUnread, r.Devices[0].MIG[0].ProcessesUnread = true, true
				return r
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{DepartedRetention: 10 * time.Second})
			b.Build(tc.before(100), gpu.SamplerStats{})
			for sec := int64(101); sec <= 130; sec++ { // refused from 101 on
				s := b.Build(tc.refused(sec), gpu.SamplerStats{})
				got := usageIn(s, tc.gi)
				_, chat := got["chat"]
				switch {
				case sec <= 111 && !chat:
					t.Fatalf("at %d s (the list refused since 101 s, within the retention) chat not carried: %+v", sec, got)
				case sec >= 113 && chat:
					t.Fatalf("at %d s (the list refused since 101 s, past the retention) chat still carried: SM %v", sec, deref(got["chat"].SMActive))
				case sec >= 113:
					u, ok := got[Unassigned]
					if !ok || deref(u.SMActive) != 0.6 || u.Method != Apportioned {
						t.Fatalf("at %d s the activity is not unassigned's, apportioned: %+v", sec, got)
					}
				}
			}
		})
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
