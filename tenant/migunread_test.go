package tenant

import (
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestMIGListRefusedCarriesHolders: while NVML refuses a MIG instance's
// process list (gpu.MIGInstance.ProcessesUnread), who runs there is not
// known and its holders are not known to have left. The instance's
// activity went to unassigned as its own measurement (method measured)
// from the first such sample, and with it the tenant's energy: now the
// holders of the sample before are carried forward, their split as it
// was, apportioned (who had it is a rule while the list is refused);
// only an instance nobody held goes to unassigned, and not as measured.
// A holder carried forward keeps its number of processes, as it keeps its
// split (it was counted 0 processes).
func TestMIGListRefusedCarriesHolders(t *testing.T) {
	type fig struct {
		sm     float64
		method Method
		procs  int
	}
	cases := []struct {
		name   string
		before []gpu.Process // instance 1's processes in the sample before
		want   map[string]fig
	}{
		{"one tenant", []gpu.Process{migProc(1, "vllm", 1, 20*gib)}, map[string]fig{"chat": {0.6, Apportioned, 1}}},
		{"two tenants", []gpu.Process{migProc(1, "vllm", 1, 20*gib), migProc(2, "train", 1, 10*gib)},
			map[string]fig{"chat": {0.4, Apportioned, 1}, "batch": {0.2, Apportioned, 1}}},
		{"nobody", nil, map[string]fig{Unassigned: {0.6, Apportioned, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, memTenants, BuilderOptions{})
			b.Build(migDevice(100, 0.6, 0, tc.before...), gpu.SamplerStats{})
			var s *Snapshot
			for sec := int64(101); sec <= 103; sec++ { // three samples refused
				r := migDevice(sec, 0.6, 0)
				r.Devices[0].ProcessesUnread, r.Devices[0].MIG[0].ProcessesUnread = true, true
				s = b.Build(r, gpu.SamplerStats{})
			}
			got := usageIn(s, "1")
			if len(got) != len(tc.want) {
				t.Errorf("instance 1's usage %+v, want tenants %v", got, tc.want)
			}
			for tn, w := range tc.want {
				u, ok := got[tn]
				if !ok {
					t.Errorf("%s: no usage on instance 1", tn)
					continue
				}
				checkF(t, tn+" SM", u.SMActive, w.sm)
				if u.Method != w.method {
					t.Errorf("%s: method %q, want %q", tn, u.Method, w.method)
				}
				if u.Processes != w.procs {
					t.Errorf("%s: %d processes, want %d", tn, u.Processes, w.procs)
				}
			}
			if tc.before != nil {
				if m := meterOf(s, Unassigned); m != nil && m.EnergyJoules > 0 {
					t.Errorf("unassigned charged %v J of the refused samples", m.EnergyJoules)
				}
			}
		})
	}
}

// TestMIGListReadAgain: once the instance's list is read again, a carried
// tenant that is not in it has left: it keeps the interval's part, then
// goes, as one seen leaving.
func TestMIGListReadAgain(t *testing.T) {
	b := mustBuilder(t, memTenants, BuilderOptions{})
	b.Build(migDevice(100, 0.6, 0, migProc(1, "vllm", 1, 20*gib)), gpu.SamplerStats{})
	r := migDevice(101, 0.6, 0)
	r.Devices[0].ProcessesUnread, r.Devices[0].MIG[0].ProcessesUnread = true, true
	b.Build(r, gpu.SamplerStats{})
	s := b.Build(migDevice(102, 0.6, 0, migProc(2, "train", 1, 10*gib)), gpu.SamplerStats{})
	got := usageIn(s, "1")
	if _, ok := got["chat"]; !ok {
		t.Errorf("chat has no part of the interval it left in: %+v", got)
	}
	s = b.Build(migDevice(103, 0.6, 0, migProc(2, "train", 1, 10*gib)), gpu.SamplerStats{})
	got = usageIn(s, "1")
	if _, ok := got["chat"]; ok || got["batch"].Method != Measured {
		t.Errorf("an interval after chat left: %+v, want batch's alone, measured", got)
	}
}
