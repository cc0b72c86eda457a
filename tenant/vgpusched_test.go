package tenant

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// slot is a scheduler log entry at ms milliseconds of runlist rl, with its
// run time and the runlist's cumulative preemption time in microseconds.
func slot(ms int64, rl uint32, runUS, preemptUS int64) gpu.VGPUSchedulerLogEntry {
	return gpu.VGPUSchedulerLogEntry{Timestamp: time.UnixMilli(ms), Runlist: rl,
		RunTime: time.Duration(runUS) * time.Microsecond, CumulativePreemp: time.Duration(preemptUS) * time.Microsecond}
}

// slotTotal is slot with the runlist's running total of run time (us).
func slotTotal(ms int64, rl uint32, runUS, totalUS, preemptUS int64) gpu.VGPUSchedulerLogEntry {
	e := slot(ms, rl, runUS, preemptUS)
	e.RunTimeTotal = time.Duration(totalUS) * time.Microsecond
	return e
}

func schedReadings(log ...gpu.VGPUSchedulerLogEntry) *gpu.Readings {
	return &gpu.Readings{Devices: []gpu.Device{
		{Index: 1, UUID: "GPU-b"}, // not a vGPU host
		{Index: 0, UUID: "GPU-a", Scheduler: &gpu.VGPUScheduler{Log: log}},
	}}
}

// count is a runlist's expected counts on GPU-a (run and preemption in us).
func count(rl uint32, runUS, preemptUS int64, slices uint64) RunlistCount {
	return RunlistCount{UUID: "GPU-a", Runlist: rl, RunTime: time.Duration(runUS) * time.Microsecond,
		Preemption: time.Duration(preemptUS) * time.Microsecond, Slices: slices}
}

func TestAddSchedulerLog(t *testing.T) {
	first := schedReadings(slot(10, 0, 900, 5000), slot(11, 1, 800, 7000), slot(12, 0, 1000, 5800))
	seen := AddSchedulerLog(nil, first)
	tests := []struct {
		name  string
		prev  []RunlistCount
		steps []*gpu.Readings
		want  []RunlistCount
	}{
		{"nil readings", nil, []*gpu.Readings{nil}, nil},
		{"no log", nil, []*gpu.Readings{schedReadings()}, nil},
		{"first sample sets the baseline at 0", nil, []*gpu.Readings{first}, []RunlistCount{count(0, 0, 0, 0), count(1, 0, 0, 0)}},
		{"accumulates", seen, []*gpu.Readings{
			schedReadings(slot(13, 1, 1500, 8000), slot(14, 0, 2000, 7300)),
			schedReadings(slot(15, 1, 500, 10000)),
		}, []RunlistCount{count(0, 2000, 1500, 1), count(1, 2000, 3000, 2)}},
		{"a log read twice counts once", seen, []*gpu.Readings{
			schedReadings(slot(13, 1, 1500, 8000)),
			schedReadings(slot(13, 1, 1500, 8000)),
		}, []RunlistCount{count(0, 0, 0, 0), count(1, 1500, 1000, 1)}},
		{"entries already counted are skipped", seen, []*gpu.Readings{
			schedReadings(slot(11, 1, 800, 7000), slot(12, 0, 1000, 5800), slot(13, 0, 300, 6000)),
		}, []RunlistCount{count(0, 300, 200, 1), count(1, 0, 0, 0)}},
		{"out of order log", seen, []*gpu.Readings{
			schedReadings(slot(14, 0, 400, 6500), slot(13, 0, 300, 6000)),
		}, []RunlistCount{count(0, 700, 700, 2), count(1, 0, 0, 0)}},
		{"a reset preemption total counts the new total", seen, []*gpu.Readings{
			schedReadings(slot(13, 1, 100, 250)),
		}, []RunlistCount{count(0, 0, 0, 0), count(1, 100, 250, 1)}},
		{"running totals count the slots the log dropped", nil, []*gpu.Readings{
			schedReadings(slotTotal(10, 0, 900, 50000, 5000)),
			// two slots of 1000 us each fell out of the log before this one
			schedReadings(slotTotal(20, 0, 1000, 53000, 6000)),
			schedReadings(slotTotal(21, 0, 200, 200, 6100)), // run total reset
		}, []RunlistCount{count(0, 3200, 1100, 2)}},
		{"timestamps that went back count again", seen, []*gpu.Readings{
			// the driver restarted its log: runlist 1's entries stamped
			// before the newest counted (11), its preemption total reset
			schedReadings(slot(3, 1, 100, 50), slot(4, 1, 300, 150)),
			schedReadings(slot(5, 1, 200, 250)),
		}, []RunlistCount{count(0, 0, 0, 0), count(1, 600, 250, 3)}},
		{"a new runlist starts at 0", seen, []*gpu.Readings{
			schedReadings(slot(13, 2, 100, 90000), slot(14, 2, 200, 90400)),
			schedReadings(slot(15, 2, 300, 90500)),
		}, []RunlistCount{count(0, 0, 0, 0), count(1, 0, 0, 0), count(2, 300, 100, 1)}},
		{"a GPU read without a scheduler drops its runlists", seen, []*gpu.Readings{
			// MIG mode on (no vGPU scheduler per GPU), or no longer a vGPU host
			{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true}}},
		}, nil},
		{"a GPU no longer listed drops its runlists", seen, []*gpu.Readings{
			{Devices: []gpu.Device{{Index: 1, UUID: "GPU-b", Up: true}}},
		}, nil},
		{"a GPU down keeps its counts", seen, []*gpu.Readings{
			schedReadings(slot(13, 1, 1500, 8000)),
			{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: false}}},
		}, []RunlistCount{count(0, 0, 0, 0), count(1, 1500, 1000, 1)}},
		{"a runlist dropped comes back at 0", seen, []*gpu.Readings{
			schedReadings(slot(13, 1, 1500, 8000)),
			{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true}}},
			schedReadings(slot(20, 1, 500, 9000)),
			schedReadings(slot(21, 1, 400, 9100)),
		}, []RunlistCount{count(1, 400, 100, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.prev)
			got := tc.prev
			for _, r := range tc.steps {
				got = AddSchedulerLog(got, r)
			}
			if !slices.Equal(tc.prev, before) {
				t.Errorf("prev modified: %+v, was %+v", tc.prev, before)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				g.last, g.lastRun, g.lastPreempt = time.Time{}, 0, 0
				if g != w {
					t.Errorf("runlist %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
	// Nothing new: the same slice, no copy.
	if again := AddSchedulerLog(seen, schedReadings()); len(again) == 0 || &again[0] != &seen[0] {
		t.Error("a sample without log entries copied the counts")
	}
}

// schedSteps decodes fuzz input into samples of scheduler log entries on
// two GPUs: per entry 27 bytes, a flags byte (bit 0: a new sample starts,
// bit 1: the second GPU, bits 2-3: the runlist, bit 4 where a sample
// starts: the first GPU is read up without a scheduler in it, and its
// entries are left out), a timestamp in ms (two bytes) and the run time,
// run total and cumulative preemption (eight bytes each, in ns, as NVML
// gives them up to the largest Duration).
func schedSteps(data []byte) []*gpu.Readings {
	var steps []*gpu.Readings
	for ; len(data) >= 27; data = data[27:] {
		if len(steps) == 0 || data[0]&1 != 0 {
			steps = append(steps, &gpu.Readings{Devices: []gpu.Device{
				{Index: 0, UUID: "GPU-a", Scheduler: &gpu.VGPUScheduler{}},
				{Index: 1, UUID: "GPU-b", Scheduler: &gpu.VGPUScheduler{}},
			}})
			if data[0]&16 != 0 {
				steps[len(steps)-1].Devices[0] = gpu.Device{Index: 0, UUID: "GPU-a", Up: true}
			}
		}
		ns := func(b []byte) time.Duration { return time.Duration(binary.BigEndian.Uint64(b) & math.MaxInt64) }
		s := steps[len(steps)-1].Devices[data[0]>>1&1].Scheduler
		if s == nil {
			continue
		}
		s.Log = append(s.Log, gpu.VGPUSchedulerLogEntry{
			Timestamp: time.UnixMilli(int64(binary.BigEndian.Uint16(data[1:3]))), Runlist: uint32(data[0] >> 2 & 3),
			RunTime: ns(data[3:11]), RunTimeTotal: ns(data[11:19]), CumulativePreemp: ns(data[19:27]),
		})
	}
	return steps
}

// schedEntryBytes encodes one entry as schedSteps reads it.
func schedEntryBytes(newSample bool, gpuB bool, rl uint8, ms uint16, run, total, preempt uint64) []byte {
	flags := rl << 2
	if newSample {
		flags |= 1
	}
	if gpuB {
		flags |= 2
	}
	b := []byte{flags}
	b = binary.BigEndian.AppendUint16(b, ms)
	for _, v := range []uint64{run, total, preempt} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

// Whatever the scheduler logs hold, the counts are counters: no runlist's
// run time, preemption time or slices ever fall (nor go negative) while it
// is counted, prev is never modified, the counts stay sorted by GPU, UUID
// and runlist, and a GPU read without a scheduler has none.
func FuzzAddSchedulerLog(f *testing.F) {
	f.Add(slices.Concat(
		schedEntryBytes(true, false, 0, 10, 900e3, 0, 5e6), schedEntryBytes(false, false, 1, 11, 800e3, 0, 7e6),
		schedEntryBytes(true, false, 0, 14, 2e6, 0, 7.3e6), schedEntryBytes(false, true, 2, 3, 1e3, 50e3, 1e3),
		schedEntryBytes(true, true, 2, 2, 1e3, 60e3, 2e3), schedEntryBytes(false, false, 1, 20, 1e3, 0, 1e3)))
	f.Add(slices.Concat( // GPU-a loses its scheduler (MIG mode on), then has it again
		schedEntryBytes(true, false, 0, 10, 900e3, 0, 5e6), schedEntryBytes(true, false, 0, 12, 900e3, 0, 6e6),
		append([]byte{17}, schedEntryBytes(false, false, 0, 13, 1e3, 0, 7e6)[1:]...),
		schedEntryBytes(true, false, 0, 14, 1e3, 0, 8e6), schedEntryBytes(true, false, 0, 15, 1e3, 0, 9e6)))
	f.Add(slices.Concat( // a driver's garbage: totals near the largest Duration, then reset
		schedEntryBytes(true, false, 0, 1, 0, 1, 1), schedEntryBytes(true, false, 0, 2, 0, math.MaxInt64, math.MaxInt64),
		schedEntryBytes(true, false, 0, 3, 0, 5, 5), schedEntryBytes(true, false, 0, 4, 0, math.MaxInt64, math.MaxInt64)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var counts []RunlistCount
		for i, r := range schedSteps(data) {
			before := slices.Clone(counts)
			next := AddSchedulerLog(counts, r)
			if !slices.Equal(counts, before) {
				t.Fatalf("sample %d modified prev", i)
			}
			if !slices.IsSortedFunc(next, func(a, b RunlistCount) int {
				return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Runlist, b.Runlist))
			}) {
				t.Fatalf("sample %d: counts out of order %+v", i, next)
			}
			for _, c := range next {
				if c.UUID == "GPU-a" && r.Devices[0].Scheduler == nil {
					t.Fatalf("sample %d: GPU-a without a scheduler kept %+v", i, c)
				}
				if c.RunTime < 0 || c.Preemption < 0 {
					t.Fatalf("sample %d: negative count %+v", i, c)
				}
				j := slices.IndexFunc(before, func(p RunlistCount) bool { return p.UUID == c.UUID && p.Runlist == c.Runlist })
				if j >= 0 && (c.RunTime < before[j].RunTime || c.Preemption < before[j].Preemption || c.Slices < before[j].Slices) {
					t.Fatalf("sample %d: runlist %s/%d fell from %+v to %+v", i, c.UUID, c.Runlist, before[j], c)
				}
			}
			counts = next
		}
	})
}
