package autotune

import (
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// DVFS: a GPU whose SM clock falls between requests (dynamic voltage and
// frequency scaling) makes every request after a gap pay for the ramp
// back up, and a clock lock at the maximum answers a violation that
// shows it (clocks). The clock a round reads is one instant of the
// sample, which under gappy load falls in a request (the clock ramped up)
// as often as in a gap, so the policy remembers, per GPU, when it last
// read the clock lowered, and a violation within dvfsMemory of that is
// blamed on DVFS.

const (
	// dvfsLow is the share of its maximum below which an unlocked SM clock
	// counts as lowered.
	dvfsLow = 0.97
	// dvfsMemory is how long a lowered clock counts.
	dvfsMemory = time.Minute
)

// clockLows is when each GPU's unlocked SM clock was last read lowered.
type clockLows struct {
	mu sync.Mutex
	at map[string]time.Time
}

// lowered records d's clock as read at now and says whether the GPU ran
// its clock lowered at a round of the last dvfsMemory, this one included.
// A clock under a lock is the lock's, not DVFS's: not recorded.
func (c *clockLows) lowered(d *gpu.Device, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]time.Time{}
	}
	locked := d.ClocksLocked != nil && *d.ClocksLocked
	if !locked && d.SMClockHz != nil && d.SMClockMaxHz != nil && *d.SMClockMaxHz > 0 && *d.SMClockHz < dvfsLow**d.SMClockMaxHz {
		c.at[d.UUID] = now
	}
	at, ok := c.at[d.UUID]
	return ok && !now.Before(at) && now.Sub(at) <= dvfsMemory
}
