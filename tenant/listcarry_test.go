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

// TestReadTenantBoundedByOwnSamplesWhileListRefused: while a process
// list is refused, a read tenant's weight (its kernel-busy time over the
// GPU's SM) was scaled up with the carried parts until the shares added
// up to 1: a tenant whose kernels ran 5% of the interval was billed 0.532
// of a GPU at 0.9. A tenant with one process read and one carried counted
// as read, its carried process's work no one's weight, and the others
// were billed for it. Now no read tenant gets more than its own samples
// allow; a partly read tenant carries the part of its carried processes,
// and the carried parts get what the read tenants leave.
func TestReadTenantBoundedByOwnSamplesWhileListRefused(t *testing.T) {
	cases := []struct {
		name        string
		gpuSM       float64
		before, now []gpu.Process
	}{
		{"a read tenant beside a carried one", 0.9,
			[]gpu.Process{wholeProc(1, "vllm", 0.01, 20*gib), mpsClient(2, "train", 0.5, 0.5)},
			[]gpu.Process{mpsClient(2, "train", 0.05, 0.5)}},
		{"a tenant partly read, its compute process carried", 0.6,
			[]gpu.Process{wholeProc(1, "vllm", 0.5, 20*gib), mpsClient(3, "vllm", 0.01, 0.5), mpsClient(2, "train", 0.1, 0.5)},
			[]gpu.Process{mpsClient(3, "vllm", 0.01, 0.5), mpsClient(2, "train", 0.1, 0.5)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			b.Build(mpsDevice(100, tc.gpuSM, tc.before...), gpu.SamplerStats{})
			r := mpsDevice(101, tc.gpuSM, tc.now...)
			r.Devices[0].ProcessesUnread = true // compute list refused, MPS clients' read
			s := b.Build(r, gpu.SamplerStats{})
			got := usageIn(s, "")
			batch, chat := got["batch"], got["chat"]
			if sm, kb := *batch.SMActive, *batch.KernelBusy; sm > kb+1e-9 {
				t.Errorf("batch SM %.3f of the GPU's %.1f, its kernels running %.2f of the interval: more than its own samples allow (chat SM %v, %d processes)",
					sm, tc.gpuSM, kb, deref(chat.SMActive), chat.Processes)
			}
			if sum := sumSM(s); math.Abs(sum-tc.gpuSM) > 1e-9 {
				t.Errorf("the tenants' SM shares add up to %v, not the GPU's %v", sum, tc.gpuSM)
			}
		})
	}
}

// TestDepartedProcessPartUnassignedWhileTenantCarried: a process missing
// from a list that was read has left. A tenant that had it and still has
// a process carried kept the departed process's part for the whole carry,
// unassigned nothing. Now the part of its processes that left is
// unassigned's in the interval they left.
func TestDepartedProcessPartUnassignedWhileTenantCarried(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	b.Build(mpsDevice(100, 0.6, wholeProc(1, "vllm", 0.5, 20*gib), mpsClient(3, "vllm", 0.01, 0.5), mpsClient(2, "train", 0.1, 0.5)), gpu.SamplerStats{})
	for sec := int64(101); sec <= 103; sec++ {
		r := mpsDevice(sec, 0.6) // compute list read, pid 1 gone; MPS clients' list refused
		r.Devices[0].MPSProcessesUnread = true
		s := b.Build(r, gpu.SamplerStats{})
		got := usageIn(s, "")
		if u, ok := got[Unassigned]; sec == 101 && (!ok || deref(u.SMActive) == 0.0) {
			t.Errorf("at %d: chat's compute process (busy 0.5) left a read list, yet unassigned has SM %v; chat SM %v with %d process",
				sec, deref(u.SMActive), deref(got["chat"].SMActive), got["chat"].Processes)
		}
		if sum := sumSM(s); math.Abs(sum-0.6) > 1e-9 {
			t.Errorf("at %d the tenants' SM shares add up to %v, not the GPU's 0.6", sec, sum)
		}
	}
}

// TestDepartedPartUnassignedsWithUnassignedPresent: the parts of the
// tenants that left while another is carried are unassigned's - but where
// unassigned was already on the GPU (an unmatched process read, or one
// carried) they went to the carried tenants. Now they are added to
// unassigned's weight, read or carried.
func TestDepartedPartUnassignedsWithUnassignedPresent(t *testing.T) {
	cases := []struct {
		name        string
		before, now []gpu.Process
	}{
		{"unassigned read", []gpu.Process{wholeProc(1, "vllm", 0.3, 20*gib), mpsClient(2, "train", 0.3, 0.5)},
			[]gpu.Process{mpsClient(3, "foo", 0.01, 0.1)}},
		{"unassigned carried", []gpu.Process{wholeProc(1, "vllm", 0.3, 20*gib), wholeProc(4, "foo", 0.1, 5*gib), mpsClient(2, "train", 0.3, 0.5)},
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			s := b.Build(mpsDevice(100, 0.6, tc.before...), gpu.SamplerStats{})
			batchBefore := *usageIn(s, "")["batch"].SMActive
			r := mpsDevice(101, 0.6, tc.now...) // batch's client gone from the read MPS list
			r.Devices[0].ProcessesUnread = true
			s = b.Build(r, gpu.SamplerStats{})
			got := usageIn(s, "")
			if u := deref(got[Unassigned].SMActive); u == nil || u.(float64) < batchBefore-1e-9 {
				t.Errorf("unassigned SM %v, chat %v: batch's departed part (SM %.4f) went to the carried chat", u, deref(got["chat"].SMActive), batchBefore)
			}
			if sum := sumSM(s); math.Abs(sum-0.6) > 1e-9 {
				t.Errorf("the tenants' SM shares add up to %v, not the GPU's 0.6", sum)
			}
		})
	}
}

// TestMPSListRefusedKeepsCounters: an MPS client's tenant carried while
// the MPS clients' list was refused was forgotten as departed once the
// retention passed (its context-switch count and energy reset), although
// the GPU's lists were not all read; the compute list refused kept it.
// Now an MPS GPU whose MPS clients' list is refused is not read for the
// retention either.
func TestMPSListRefusedKeepsCounters(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{DepartedRetention: 10 * time.Second})
	var lastCS, lastE float64
	for sec := int64(100); sec <= 141; sec++ {
		r := mpsDevice(sec, 0.6, mpsClient(2, "vllm", 0.4, 0.5))
		if sec > 100 && sec < 140 { // the MPS clients' list refused for 39 s
			r.Devices[0].Processes, r.Devices[0].MPSProcessesUnread = nil, true
		}
		s := b.Build(r, gpu.SamplerStats{})
		u, ok := usageIn(s, "")["chat"]
		if !ok {
			continue
		}
		e := meterOf(s, "chat").EnergyJoules
		if *u.ContextSwitchesTotal < lastCS || e < lastE {
			t.Fatalf("at %d s chat's context switches %v -> %v, energy %v -> %v J: counters reset though its list was never read without it",
				sec, lastCS, *u.ContextSwitchesTotal, lastE, e)
		}
		lastCS, lastE = *u.ContextSwitchesTotal, e
	}
}

// TestCarryRetentionRestartsAfterReadSample: the retention of a refused
// list counts from the first sample that refused it since it was last
// read: one read sample restarts it (whole GPU and MIG instance).
func TestCarryRetentionRestartsAfterReadSample(t *testing.T) {
	for _, mig := range []bool{false, true} {
		b := mustBuilder(t, memTenants, BuilderOptions{DepartedRetention: 10 * time.Second})
		gi := map[bool]string{false: "", true: "1"}[mig]
		mk := func(sec int64, refuse bool) *gpu.Readings {
			if mig {
				r := migDevice(sec, 0.6, 0, migProc(1, "vllm", 1, 20*gib))
				if refuse {
					r.Devices[0].Processes = nil
					r.Devices[0].ProcessesUnread, r.Devices[0].MIG[0].ProcessesUnread = true, true
				}
				return r
			}
			r := wholeDevice(sec, 0.6, wholeProc(1, "vllm", 0.4, 20*gib))
			if refuse {
				refused(r)
			}
			return r
		}
		for sec := int64(100); sec <= 125; sec++ { // read at 100 s and 109 s only
			s := b.Build(mk(sec, sec != 100 && sec != 109), gpu.SamplerStats{})
			_, chat := usageIn(s, gi)["chat"]
			if !chat && sec <= 120 || chat && sec >= 122 {
				t.Errorf("mig=%v at %d s chat carried %v (the list refused since 110 s)", mig, sec, chat)
			}
		}
	}
}

// TestFlakyComputeListConserves: with the compute list refused every
// other sample, the tenants' SM shares and context switches (served and
// kept) add up to the GPU's, and both tenants stay served.
func TestFlakyComputeListConserves(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	b.Build(mpsDevice(100, 0.6, wholeProc(1, "vllm", 0.3, 20*gib), mpsClient(2, "train", 0.3, 0.5)), gpu.SamplerStats{})
	for sec := int64(101); sec <= 120; sec++ {
		r := mpsDevice(sec, 0.6, wholeProc(1, "vllm", 0.3, 20*gib), mpsClient(2, "train", 0.3, 0.5))
		if sec%2 == 1 {
			r.Devices[0].Processes = r.Devices[0].Processes[1:]
			r.Devices[0].ProcessesUnread = true
		}
		s := b.Build(r, gpu.SamplerStats{})
		var cs float64
		for _, u := range s.Usage {
			if u.ContextSwitchesTotal != nil {
				cs += *u.ContextSwitchesTotal
			}
		}
		for _, k := range s.KeptContextSwitches {
			cs += k.Total
		}
		if math.Abs(sumSM(s)-0.6) > 1e-9 || math.Abs(cs-float64(1000*(sec-100))) > 1e-6 || len(s.Usage) != 2 {
			t.Errorf("at %d s: SM %v (GPU 0.6), context switches %v (GPU %d), %d usages (2 tenants)", sec, sumSM(s), cs, 1000*(sec-100), len(s.Usage))
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
