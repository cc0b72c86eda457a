package tuner

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// The journal's lines are read back after crashes, torn writes and
// whatever else touched the file: no line panics the reader, and a line
// taken as whole and valid writes back to a line read the same.
func FuzzParseRecord(f *testing.F) {
	for _, rec := range []Record{
		{Event: EventOriginal, Target: Target{GPU: "GPU-0", Knob: "power_limit"}, From: encodeValue(Watts(700))},
		{Event: EventOriginal, Target: Target{GPU: "GPU-0", Knob: "pause_duty", PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}},
		{Event: EventProcesses, Target: Target{GPU: "GPU-0", Knob: "pause_duty", PID: 7}, Tenant: "train", PIDs: []uint32{9}},
		{Event: EventRestored, Target: Target{GPU: "GPU-0", Knob: "locked_clocks"}, From: encodeValue(ClockRange{MinMHz: 1980, MaxMHz: 1980})},
		{Time: time.Date(2026, 1, 1, 0, 0, 40, 5, time.UTC), Event: EventRestarted, Target: Target{GPU: "GPU-0", Knob: "mps_active_threads", PID: 7}, Tenant: "embed", PIDs: []uint32{7, 12}, Others: []uint32{8}},
		{Event: EventOriginal, Target: Target{GPU: "GPU-0", Knob: "pause_duty", PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8},
			Identity: Identity{Boot: testBoot, Starts: []uint64{4242, 0}}},
		{Event: EventProcesses, Target: Target{GPU: "GPU-0", Knob: "pause_duty", PID: 7}, Tenant: "train", PIDs: []uint32{9},
			Identity: Identity{Boot: testBoot, Starts: []uint64{maxJournalTicks}}},
		{Event: EventOriginal, Target: Target{GPU: "GPU-0", Knob: "pause_duty", PID: 7}, Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8},
			Identity: Identity{Boot: testBoot, Starts: []uint64{4242, 0}, Cgroups: []gpu.Cgroup{{Path: "/kubepods/pod1/cri-containerd-ab", ID: 5}, {V1: true, Path: "/system.slice/a.service", ID: 1 << 40}}}},
		{Event: EventOriginal, Target: Target{GPU: "GPU-0", Knob: "mps_active_threads", PID: 7}, Tenant: "embed", From: encodeValue(Fraction(1)),
			Client: &ClientIdentity{Boot: testBoot, Start: maxJournalTicks}},
	} {
		b, err := encodeRecord(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"event":"original","target":{"gpu":"G","knob":"pause_duty"},"from":{"kind":"duty","num":0},"pids":[0]}` + "\n"))
	f.Add([]byte("J1 zzzzzzzz 00000000 {}\n"))
	f.Add([]byte(`{"event":"` + strings.Repeat("e", 4000) + `","target":{"gpu":"G","knob":"power_limit"}}` + "\n")) // said bounded
	pause := `{"event":"original","target":{"gpu":"G","knob":"pause_duty"},"from":{"kind":"duty","num":0},"pids":[7]`
	for _, id := range []string{`"boot":"` + testBoot + `","starts":[1]`, `"boot":"` + strings.ToUpper(testBoot) + `","starts":[1]`,
		`"boot":"x","starts":[1]`, `"starts":[1]`, `"boot":"` + testBoot + `","starts":[1,2]`, `"boot":"` + testBoot + `","starts":[-1]`,
		`"boot":"` + testBoot + `","starts":[1e30]`, `"boot":"` + testBoot + `","starts":[281474976710657]`,
		`"boot":"` + testBoot + `","starts":[1],"cgroups":[{"path":"/a/b","id":7}]`, `"starts":[1],"cgroups":[{"path":"/a","id":7}]`,
		`"boot":"` + testBoot + `","starts":[1],"cgroups":[{"v1":true,"path":"/a/../b","id":7}]`, `"boot":"` + testBoot + `","starts":[1],"cgroups":[{"path":"/a","id":-1}]`,
		`"boot":"` + testBoot + `","starts":[1],"cgroups":[{"path":"/","id":7}]`, `"boot":"` + testBoot + `","starts":[1],"cgroups":[{"path":"/a"}]`} {
		f.Add([]byte(pause + "," + id + "}\n"))
	}
	mps := `{"event":"original","target":{"gpu":"G","knob":"mps_active_threads","pid":7},"from":{"kind":"fraction","num":1}`
	for _, c := range []string{`"client":{"boot":"` + testBoot + `","start":4242}`, `"client":{"boot":"` + testBoot + `","start":0}`,
		`"client":{"boot":"` + testBoot + `","start":281474976710657}`, `"client":{"boot":"` + testBoot + `","start":-1}`,
		`"client":{"boot":"x","start":1}`, `"client":{"start":1}`, `"client":null`, `"client":{}`, `"client":[]`,
		`"boot":"` + testBoot + `","starts":[1]`, `"client":{"boot":"` + testBoot + `","start":1},"boot":"` + testBoot + `","starts":[1]`} {
		f.Add([]byte(mps + "," + c + "}\n"))
	}
	f.Add([]byte(pause + `,"client":{"boot":"` + testBoot + `","start":1}}` + "\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, why := parseRecord(line)
		if why != "" {
			// what the start's log and the listing say of it: printable, bounded
			if d := badDetail(line, why); len(d) > 1024 || !utf8.ValidString(d) || strings.IndexFunc(d, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
				t.Fatalf("a dropped line is said as %q", d)
			}
			return
		}
		if err := validRecord(rec); err != nil {
			t.Fatalf("a record taken as valid is not: %v", err)
		}
		b, err := encodeRecord(rec)
		if err != nil {
			return // a reason cut to its bound, or a record over the bound once framed
		}
		again, why := parseRecord(b)
		if why != "" {
			t.Fatalf("a valid record written back reads as %s: %q", why, b)
		}
		if again.Event != rec.Event || again.Target != rec.Target || again.Tenant != rec.Tenant || !slices.Equal(again.PIDs, rec.PIDs) ||
			!slices.Equal(again.Others, rec.Others) || !again.Time.Equal(rec.Time) ||
			again.Boot != rec.Boot || !slices.Equal(again.Starts, rec.Starts) || !slices.Equal(again.Cgroups, rec.Cgroups) ||
			(again.Client == nil) != (rec.Client == nil) || again.Client != nil && *again.Client != *rec.Client {
			t.Fatalf("read back %+v, want %+v", again, rec)
		}
	})
}
