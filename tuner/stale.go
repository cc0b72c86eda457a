package tuner

import (
	"fmt"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// A round whose snapshot is stale decides nothing: no sample came since
// the last round and the one it has is older than Options.StaleAfter.
// Sampling stalled (a hung NVML call or driver), and the snapshot's figures
// are of the last sample: its SLO counters, frozen, would read as tenants
// with no requests in the fast window, and a change would be judged, or
// reverted, on what the tuner no longer sees. Such a round still restores
// what an earlier run left, thaws what must be thawed (the kill switch, a
// tenant classed latency, a GPU whose mode left enforce), follows the
// pauses in force and carries a MIG relayout under way to its end (or its
// timeout, which starts the stopped processes again); it changes nothing
// else until a new sample comes. The pauses in force keep their duty
// meanwhile, within their ceiling and longest pause.

// StaleAfterFor is Options.StaleAfter for samples taken every
// sampleInterval: five intervals, at least 10s.
func StaleAfterFor(sampleInterval time.Duration) time.Duration {
	return max(5*sampleInterval, 10*time.Second)
}

// staleAge returns how old snap is at now where it is stale, else 0: no
// newer than prev (the last round's snapshot) and older than
// Options.StaleAfter. A slow sampler whose samples come between rounds
// never holds one, however old each is when it arrives. Without a
// StaleAfter, a previous round or a snapshot time, 0.
func (t *Tuner) staleAge(prev, snap *tenant.Snapshot, now time.Time) time.Duration {
	if t.o.StaleAfter <= 0 || prev == nil || snap == nil || snap.Time.IsZero() || snap.Time.After(prev.Time) {
		return 0
	}
	if age := now.Sub(snap.Time); age > t.o.StaleAfter {
		return age
	}
	return 0
}

// noteStale logs a stale snapshot's hold once when it starts, and its end.
func (t *Tuner) noteStale(age time.Duration, snap *tenant.Snapshot) {
	stale := age > 0
	if stale == t.staleHeld {
		return
	}
	t.staleHeld = stale
	if stale {
		level.Warn(t.o.Logger).Log("msg", "tuner holding: no new sample, the tuner changes nothing (thaws and restores excepted) until sampling resumes",
			"last_sample", snap.Time, "age", age.Round(time.Second), "stale_after", t.o.StaleAfter)
		return
	}
	level.Info(t.o.Logger).Log("msg", "tuner: samples are new again, the tuner decides again")
}

// staleWhy is a stale round's reason on every GPU.
func staleWhy(age time.Duration, last time.Time) string {
	return fmt.Sprintf("no new sample for %s (the last at %s): the tuner changes nothing (thaws and restores excepted) until sampling resumes",
		age.Round(time.Second), last.UTC().Format(time.TimeOnly))
}
