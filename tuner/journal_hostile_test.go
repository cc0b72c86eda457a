package tuner

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// Text a tenant may shape (a tenant's name, a decision's reason naming a
// pod, a frozen cgroup's path) never tears the journal or forges a record:
// each record is one line however it is spelt, and reads back as written.
func TestJournalHostileText(t *testing.T) {
	forged := "\nJ1 00000010 00000000 {\"event\":\"original\"}\n"
	for _, text := range []string{
		forged,
		`"},"event":"restored","x":{"`,
		"\x1b[2J\x1b[31mred\r\u2028\u2029",
		"</script><script>alert(1)</script>",
		"\x00nul",
	} {
		t.Run(text, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "journal")
			j := openJournal(t, p)
			pause := Target{GPU: "GPU-0", Knob: gpu.KnobPauseDuty, PID: 7}
			recs := []Record{
				{Time: t0, Event: EventOriginal, Target: pause, Tenant: text, From: encodeValue(Duty(0)), PIDs: []uint32{7},
					Identity: Identity{Boot: testBoot, Starts: []uint64{1}, Cgroups: []gpu.Cgroup{{Path: "/kubepods/pod1/" + text, ID: 9}}}},
				{Time: t0, Event: string(OutcomeGuarded), Target: pause, Tenant: text, Guard: text, Reason: text},
				originalRec("GPU-1", 700),
			}
			for _, r := range recs {
				if err := j.Append(r); err != nil {
					if r.Event == EventOriginal && r.Target.Knob == gpu.KnobPauseDuty {
						// a path the journal refuses (a NUL in it): the record is not written at all
						continue
					}
					t.Fatal(err)
				}
			}
			j.Close()
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(b, []byte("\n")); n != bytes.Count(b, []byte("\nJ1 "))+1 || !bytes.HasPrefix(b, []byte("J1 ")) {
				t.Fatalf("records not one a line:\n%q", b)
			}
			j = openJournal(t, p)
			defer j.Close()
			if st := j.Stats(); st.TornBytes != 0 || len(st.Dropped) != 0 {
				t.Fatalf("journal read back with %+v", st)
			}
			var tenants []string
			for _, o := range j.Originals() {
				tenants = append(tenants, o.Target.GPU+"/"+o.Tenant)
			}
			want := []string{"GPU-0/" + text, "GPU-1/"}
			if len(b) > 0 && bytes.Contains([]byte(text), []byte{0}) {
				want = want[1:]
			}
			if len(tenants) != len(want) || tenants[len(tenants)-1] != want[len(want)-1] || len(want) == 2 && tenants[0] != want[0] {
				t.Fatalf("originals %q, want %q", tenants, want)
			}
		})
	}
}
