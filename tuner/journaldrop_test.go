package tuner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An operator drops the originals no start can restore, by target or by
// GPU; a name that matches nothing drops nothing; the next start holds
// only the others, and the journal says who closed them and why.
func TestDropJournalOriginals(t *testing.T) {
	capOf := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: "GPU-a", Knob: gpu.KnobMPSActiveThreads, PID: 7}, Tenant: "chat", From: encodeValue(Fraction(1))}
	recs := []Record{originalRec("GPU-a", 700), capOf, originalRec("GPU-b", 600)}
	tests := []struct {
		name       string
		keys, gpus []string
		why        string
		wantErr    string
		dropped    []string // targets
	}{
		{name: "by target", keys: []string{"GPU-a/mps_active_threads/pid7"}, why: "client restarted by hand", dropped: []string{"GPU-a/mps_active_threads/pid7"}},
		{name: "by GPU", gpus: []string{"GPU-a"}, why: "GPU replaced", dropped: []string{"GPU-a/mps_active_threads/pid7", "GPU-a/power_limit"}},
		{name: "by both, once each", keys: []string{"GPU-a/power_limit"}, gpus: []string{"GPU-a"}, why: "GPU replaced", dropped: []string{"GPU-a/mps_active_threads/pid7", "GPU-a/power_limit"}},
		{name: "unknown target", keys: []string{"GPU-a/power_limit", "GPU-c/power_limit"}, why: "x", wantErr: `"GPU-c/power_limit" is no open original`},
		{name: "unknown GPU", gpus: []string{"GPU-z"}, why: "x", wantErr: `GPU "GPU-z" has no open original`},
		{name: "no reason", keys: []string{"GPU-a/power_limit"}, why: " ", wantErr: "a reason is needed"},
		{name: "nothing named", why: "x", wantErr: "nothing named"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := crashedJournal(t, recs...)
			p := j.Path()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			got, _, err := DropJournalOriginals(p, tt.keys, tt.gpus, tt.why, t0.Add(time.Hour))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range got {
				names = append(names, o.Target.String())
			}
			if !slices.Equal(names, tt.dropped) {
				t.Errorf("dropped %q, want %q", names, tt.dropped)
			}
			left, err := ReadJournalOriginals(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(left)+len(tt.dropped) != len(recs) {
				t.Errorf("%d originals left, want %d", len(left), len(recs)-len(tt.dropped))
			}
			for _, o := range left {
				if slices.Contains(tt.dropped, o.Target.String()) {
					t.Errorf("%s still open", o.Target)
				}
			}
			if n := len(tt.dropped); n > 0 {
				last := lastRecords(t, p, n)
				for _, r := range last {
					if r.Event != EventRestored || !strings.HasPrefix(r.Reason, DroppedBy+": "+tt.why) {
						t.Errorf("closing record %+v, want %q with the reason", r, EventRestored)
					}
				}
			}
		})
	}
}

// The drop takes the journal's lock: refused while an exporter runs on
// it, and a journal that does not exist is not made.
func TestDropJournalOriginalsRefused(t *testing.T) {
	j := crashedJournal(t, originalRec("GPU-a", 700))
	if _, _, err := DropJournalOriginals(j.Path(), nil, []string{"GPU-a"}, "x", t0); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("drop beside a running exporter: %v, want refused as in use", err)
	}
	if n := len(j.Originals()); n != 1 {
		t.Errorf("%d originals, want 1", n)
	}
	missing := filepath.Join(t.TempDir(), "journal")
	if _, _, err := DropJournalOriginals(missing, nil, []string{"GPU-a"}, "x", t0); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("drop from a missing journal: %v, want no such file", err)
	}
	if _, err := ReadJournalOriginals(missing); err != nil {
		t.Error(err)
	}
	if left, _ := filepath.Glob(missing + "*"); len(left) != 0 {
		t.Errorf("files made: %v", left)
	}
}

// lastRecords are the last n records of the journal at p.
func lastRecords(t *testing.T, p string, n int) []Record {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < n {
		t.Fatalf("%d records, want at least %d", len(lines), n)
	}
	var out []Record
	for _, l := range lines[len(lines)-n:] {
		r, why := parseRecord([]byte(l))
		if why != "" {
			t.Fatalf("record %q: %s", l, why)
		}
		out = append(out, r)
	}
	return out
}
