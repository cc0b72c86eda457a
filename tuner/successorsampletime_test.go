package tuner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The absence of a successor told while the journal cannot take its
// original is counted in sample time, as a start's unlisted original's
// is (awaitsListing): a sampler that stalls, the rounds seeing one
// snapshot that misses the successor while their clock moves on, gives
// nothing up; only newer samples that keep missing it for a minute do.
// Before, the rounds' clock counted: two minutes of rounds on one stale
// snapshot gave the successor up, and it kept the tuner's cap for good
// with a clean exit.
func TestToldSuccessorAbsenceInSampleTime(t *testing.T) {
	for _, c := range []struct {
		name  string
		stale bool // the rounds see one snapshot again and again
		gone  bool // given up, and not set back at exit
	}{
		{"one sample seen for two minutes", true, false},
		{"new samples missing it for two minutes", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			host := &diskFullAfterRestart{}
			host.next = map[uint32]uint32{7: 9}
			r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
			r.restart(t, embed(7), batch(8))
			r.round(t, batch(8), embed(9))
			r.round(t, batch(8), embed(9))
			r.clk.Advance(15 * time.Second)
			missed := tenantSnap(r.clk.Now(), batch(8))
			for range 8 {
				if !c.stale {
					missed = tenantSnap(r.clk.Now(), batch(8))
				}
				if _, err := r.tu.RunOnce(context.Background(), missed); err != nil {
					t.Fatal(err)
				}
				r.clk.Advance(15 * time.Second)
			}
			r.round(t, batch(8), embed(9))
			if given := strings.Contains(r.log.String(), toGone); given != c.gone {
				t.Errorf("successor given up: %v, want %v\nlog: %s", given, c.gone, r.log.String())
			}
			r.host.Calls = nil
			_, _ = r.tu.Restore(context.Background())
			if set := slices.Equal(r.host.Calls, restoredOn9); set == c.gone {
				t.Errorf("restore at exit: calls %q (successor given up: %v)", r.host.Calls, c.gone)
			}
		})
	}
}

// At exit, a successor told while the journal cannot take its original
// that the latest samples miss is set back where a sample listed it under
// its tenant within GoneAfter of the latest (a sample may miss a running
// client), by the identity read when it was told: a process that took its
// PID meanwhile is not restarted. One missed for longer is left to the
// next start, which says so.
func TestToldSuccessorMissedBeforeExit(t *testing.T) {
	for _, c := range []struct {
		name   string
		missed int  // samples missing PID 9 before the exit
		reused bool // another process holds PID 9 at exit
		calls  []string
	}{
		{"one sample", 1, false, restoredOn9},
		{"three samples", 3, false, restoredOn9},
		{"one sample, PID taken", 1, true, nil},
		{"five samples", 5, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { writeFile = (*os.File).Write })
			host := &diskFullIDs{starts: map[uint32]uint64{7: 70, 8: 80}}
			r := newUnnamedRunOn(t, filepath.Join(t.TempDir(), "journal"), &host.successorHost, host)
			r.restart(t, embed(7), batch(8))
			delete(host.starts, 7)
			host.starts[9] = 90
			for range 10 {
				r.round(t, batch(8), embed(9))
			}
			for range c.missed {
				r.round(t, batch(8))
			}
			if c.reused {
				host.starts[9] = 95
			}
			r.host.Calls = nil
			_, err := r.tu.Restore(context.Background())
			if !slices.Equal(r.host.Calls, c.calls) {
				t.Errorf("restore at exit: calls %q, want %q (err %v)", r.host.Calls, c.calls, err)
			}
		})
	}
}
