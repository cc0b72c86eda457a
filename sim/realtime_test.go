package sim

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// realTimeLoad is a scenario whose model work grows with the time
// simulated: thousands of requests a second.
const realTimeLoad = `name: busy
gpus: [{model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, memory: 4GiB, workload: {type: dnn, flops: 1e8, arrival: {process: poisson, rate: 1000}}}
  - {name: b, memory: 4GiB, workload: {type: dnn, flops: 1e8, arrival: {process: poisson, rate: 1000}}}
`

// slowClock is a manual clock that a read moves on by tick while ticking:
// the simulator, which reads it between steps of its work, then looks as
// slow as tick of the Clock for each. The ticks are taken back when it
// stops ticking, so that a test's gaps between samples are its own.
type slowClock struct {
	mu      sync.Mutex
	now     time.Time
	tick    time.Duration
	ticking bool
	was     time.Time // when it started ticking
}

var _ gpu.Clock = (*slowClock)(nil)

func (c *slowClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	if c.ticking {
		c.now = c.now.Add(c.tick)
	}
	return t
}

func (c *slowClock) After(d time.Duration) <-chan time.Time { panic("not used") }

func (c *slowClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *slowClock) setTicking(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on && !c.ticking {
		c.was = c.now
	} else if !on && c.ticking {
		c.now = c.was
	}
	c.ticking = on
}

// TestRealTimeCatchUpBounded: in real-time mode a sample that finds the
// Clock far ahead, on a machine too slow to catch up (each look at the
// Clock between the model's steps finds it 400ms on), simulates about
// DefaultMaxCatchUp (1s) of it and skips the rest, instead of the whole
// gap; its readings carry the sample's time. A simulator that keeps up
// (the Clock still while it works) simulates every gap in full.
func TestRealTimeCatchUpBounded(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		ticking bool
		gap     time.Duration
		want    time.Duration // model time a sample simulates
	}{
		// three steps of 250ms: the Clock is 1.2s on after them (the
		// first read, the sync's start, moves it too)
		{"slow, behind", true, 5 * time.Minute, 750 * time.Millisecond},
		{"slow, within a step", true, 200 * time.Millisecond, 200 * time.Millisecond},
		{"keeping up", false, 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &slowClock{now: start, tick: 400 * time.Millisecond}
			s := mustNew(t, mustParse(t, realTimeLoad), Options{Clock: clk})
			ctx := context.Background()
			for i := range 2 {
				s.mu.Lock()
				was, done := s.now, 0
				for _, tn := range s.tenants {
					done += tn.completed
				}
				s.mu.Unlock()
				clk.advance(tc.gap)
				at := clk.Now()
				clk.setTicking(tc.ticking)
				r, err := s.Sample(ctx)
				clk.setTicking(false)
				if err != nil {
					t.Fatal(err)
				}
				s.mu.Lock()
				ran := time.Duration(s.now - was)
				for _, tn := range s.tenants {
					done -= tn.completed
				}
				s.mu.Unlock()
				if ran != tc.want || (i > 0 && r.Interval != tc.want) {
					t.Errorf("sample %d: simulated %v (interval %v), want %v", i, ran, r.Interval, tc.want)
				}
				// model work: about 2000 requests a second simulated
				if n := -done; n > int(4000*tc.want.Seconds())+100 {
					t.Errorf("sample %d: %d requests completed, want about %.0f", i, n, 2000*tc.want.Seconds())
				}
				if !r.Time.Equal(at) {
					t.Errorf("sample %d: readings at %v, want %v", i, r.Time, at)
				}
			}
		})
	}
}

// TestRealTimeSkipNoted: the time skipped is counted in Skipped and told
// to OnSkip at the first skip and then at most once a minute of the Clock,
// with what was skipped since; a negative MaxCatchUp skips nothing.
func TestRealTimeSkipNoted(t *testing.T) {
	type note struct{ skipped, total time.Duration }
	for _, tc := range []struct {
		name    string
		catchUp time.Duration
		gaps    []time.Duration
		notes   []note
		skipped time.Duration
	}{
		// each sample simulates 250ms: the Clock is then 1s on (the
		// sync's start read it once)
		{"within a step", time.Second, []time.Duration{200 * time.Millisecond, 250 * time.Millisecond}, nil, 0},
		{"first skip noted", time.Second, []time.Duration{5 * time.Second}, []note{{4750 * time.Millisecond, 4750 * time.Millisecond}}, 4750 * time.Millisecond},
		{"once a minute", time.Second,
			// samples at 5s, 15s, 35s, 36s, 66s and 76s, each skipping
			// all but 250ms, noted at 6s and 67s (a tick after each)
			[]time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, time.Second, 30 * time.Second, 10 * time.Second},
			[]note{{4750 * time.Millisecond, 4750 * time.Millisecond}, {(9750 + 19750 + 750 + 29750) * time.Millisecond, 64750 * time.Millisecond}},
			74500 * time.Millisecond},
		{"no bound", -1, []time.Duration{time.Minute}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &slowClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), tick: time.Second}
			var notes []note
			s := mustNew(t, mustParse(t, realTimeLoad), Options{Clock: clk, MaxCatchUp: tc.catchUp,
				OnSkip: func(skipped, total time.Duration) { notes = append(notes, note{skipped, total}) }})
			for _, gap := range tc.gaps {
				clk.advance(gap)
				at := clk.Now()
				clk.setTicking(true)
				if _, err := s.Sample(context.Background()); err != nil {
					t.Fatal(err)
				}
				clk.setTicking(false)
				if !s.Now().Equal(at) {
					t.Errorf("simulator at %v, want %v", s.Now(), at)
				}
			}
			if len(notes) != len(tc.notes) {
				t.Fatalf("notes %v, want %v", notes, tc.notes)
			}
			for i := range notes {
				if notes[i] != tc.notes[i] {
					t.Errorf("notes %v, want %v", notes, tc.notes)
				}
			}
			if got := s.Skipped(); got != tc.skipped {
				t.Errorf("Skipped %v, want %v", got, tc.skipped)
			}
		})
	}
}
