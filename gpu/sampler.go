package gpu

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/overdue"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// SamplerStats are the sampler's own figures, exported as meta-metrics.
type SamplerStats struct {
	SamplesTotal   uint64
	ErrorsTotal    uint64
	LastDuration   time.Duration // wall time the last Sample call took
	LastSuccess    time.Time     // clock time of the last successful sample
	LastError      string        // empty after a success
	ConsecutiveErr int
	Interval       time.Duration // the sampler's interval: one sample is asked for each
	// PublishDuration is the wall time the subscribers of the last sample
	// whose subscribers have returned took (building and publishing its
	// snapshot, rendering the pages; after a failed sample, publishing
	// its figures): time the sample's interval spends besides the
	// backend's call, LastDuration.
	PublishDuration time.Duration
	// DuplicatesDropped counts the devices dropped from the readings for
	// repeating a GPU listed before them in the same sample (keepIdentity).
	DuplicatesDropped uint64
}

// Sampler polls a Source every Interval on an injected Clock and publishes
// each successful Readings to its subscribers and through Latest. A failing
// sample is counted and logged, never fatal: the last good readings stay
// published, and the failure's subscribers are told of it.
type Sampler struct {
	src      Source
	clock    Clock
	interval time.Duration
	logger   log.Logger
	// stuckAfter is how long a sample may run before it is logged as not
	// returned (a backend call hung: the sample cannot be cut).
	stuckAfter time.Duration

	latest atomic.Pointer[Readings]

	mu       sync.Mutex
	subs     []func(*Readings)
	failSubs []func(SamplerStats)
	stats    SamplerStats // stats.LastError is the previous sample's error, "" after a success
	known    map[string]identity
	// dups bounds the lines that say a sample listed a GPU twice.
	dups *ratelog.Log
}

// identity is what a GPU's last good reading said of its sharing mode and
// the source of its activity figures, which a lost GPU's reading cannot
// say: it keeps them, so that vgpu_gpu_info keeps its labels (and its one
// series) while the GPU is lost.
type identity struct {
	mode   SharingMode
	source string
}

// NewSampler returns a Sampler. A nil clock means RealClock and a nil logger
// discards.
func NewSampler(src Source, clock Clock, interval time.Duration, logger log.Logger) *Sampler {
	if clock == nil {
		clock = RealClock{}
	}
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if interval <= 0 {
		interval = time.Second
	}
	return &Sampler{src: src, clock: clock, interval: interval, logger: logger, stuckAfter: StuckSampleAfter, stats: SamplerStats{Interval: interval},
		dups: ratelog.New(duplicateLogEvery, 1)}
}

// duplicateLogEvery is how often at most a sample that lists a GPU twice
// is logged at warning level (the others at debug level).
const duplicateLogEvery = 10 * time.Minute

// StuckSampleAfter is how long a sample runs before the sampler logs that
// it has not returned: a driver call that hangs holds the sample, and with
// it every series, and counts no error; without this line nothing says so.
const StuckSampleAfter = time.Minute

// Subscribe registers f to receive every successful Readings, in sample
// order, on the sampler's goroutine. f must not modify the Readings.
// Subscribe before Run.
func (s *Sampler) Subscribe(f func(*Readings)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, f)
}

// SubscribeFailures registers f to run after each failed sample, on the
// sampler's goroutine, with the sampler's figures as of that sample (the
// last successful sample's readings and snapshot stay published: f
// publishes the new figures). Subscribe before Run.
func (s *Sampler) SubscribeFailures(f func(SamplerStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSubs = append(s.failSubs, f)
}

// Latest returns the most recent successful Readings, or nil before the first.
func (s *Sampler) Latest() *Readings { return s.latest.Load() }

// Stats returns a copy of the sampler's counters.
func (s *Sampler) Stats() SamplerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Source returns the polled source.
func (s *Sampler) Source() Source { return s.src }

// SampleOnce takes one sample now and publishes it. It returns the Source's
// error, which has already been counted and logged. A sample cut short
// because ctx is done (the exporter is stopping) is neither counted nor
// logged, and returns ctx's error.
func (s *Sampler) SampleOnce(ctx context.Context) error {
	start := time.Now() // wall time: how long the backend call really took
	end := overdue.Watch(s.stuckAfter, func() {
		level.Error(s.logger).Log("msg", "sample has not returned: a call to the backend hangs, and the GPU series stay as they were until it returns", "backend", s.src.Name(), "running_for", s.stuckAfter)
	})
	r, err := s.src.Sample(ctx)
	took := time.Since(start)
	if end() {
		level.Warn(s.logger).Log("msg", "sample returned after hanging", "backend", s.src.Name(), "took", took)
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}

	s.mu.Lock()
	s.stats.SamplesTotal++
	s.stats.LastDuration = took
	if err != nil {
		first := s.stats.LastError != err.Error()
		s.stats.ErrorsTotal++
		s.stats.ConsecutiveErr++
		s.stats.LastError = err.Error()
		st, fs := s.stats, slices.Clone(s.failSubs)
		s.mu.Unlock()
		// Log a repeating error once, then at debug level.
		lvl := level.Debug
		if first {
			lvl = level.Error
		}
		lvl(s.logger).Log("msg", "sample failed", "backend", s.src.Name(), "err", err)
		s.notify(func() {
			for _, f := range fs {
				f(st)
			}
		})
		return err
	}
	if s.stats.LastError != "" {
		level.Info(s.logger).Log("msg", "sampling recovered", "backend", s.src.Name())
	}
	s.stats.ConsecutiveErr = 0
	s.stats.LastError = ""
	s.stats.LastSuccess = s.clock.Now()
	subs := append([]func(*Readings){}, s.subs...)
	r, dups := s.dropDuplicates(r)
	r = s.keepIdentity(r)
	s.mu.Unlock()
	s.logDuplicates(dups)

	s.latest.Store(r)
	s.notify(func() {
		for _, f := range subs {
			f(r)
		}
	})
	return nil
}

// notify runs the subscribers through tell and records the wall time
// they took (PublishDuration).
func (s *Sampler) notify(tell func()) {
	start := time.Now() // wall time, as the sample's
	tell()
	took := time.Since(start)
	s.mu.Lock()
	s.stats.PublishDuration = took
	s.mu.Unlock()
}

// logDuplicates says that a sample listed the GPUs dups more than once
// (their later copies were dropped): at warning level at most once per
// duplicateLogEvery, else at debug level.
func (s *Sampler) logDuplicates(dups []string) {
	if len(dups) == 0 {
		return
	}
	lvl, kv := level.Debug, []any{}
	if held, ok := s.dups.NoteAt(s.clock.Now()); ok {
		lvl, kv = level.Warn, []any{"samples_held_back", held}
	}
	lvl(s.logger).Log(append([]any{"msg", "the backend listed a GPU twice in one sample: its later copies are dropped, so that every series and tenant sees one device (vgpu_sample_duplicate_gpus_dropped_total)", "backend", s.src.Name(), "gpus", strings.Join(dups, ",")}, kv...)...)
}

// Run samples immediately and then every interval until ctx is done. A
// sample starts an interval after the one before started, not after it
// ended: the time a sample takes does not stretch the interval. One that
// takes longer than the interval is followed at the next whole interval
// from its start (the ticks it covered are skipped, never run back to
// back).
func (s *Sampler) Run(ctx context.Context) {
	for {
		start := s.clock.Now()
		_ = s.SampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(UntilNext(s.clock, start, s.interval)):
		}
	}
}

// keepIdentity records the mode and activity source of each GPU read in r, and gives a lost GPU of r (not Up) those
// of its last good reading where r has none. What it changes it changes
// in a copy of r, which the source may still hold. GPUs r does not list
// are forgotten. Called with s.mu held.
func (s *Sampler) keepIdentity(r *Readings) *Readings {
	if r == nil {
		return nil
	}
	known := make(map[string]identity, len(r.Devices))
	out := r
	for i := range r.Devices {
		d := &r.Devices[i]
		id, ok := s.known[d.UUID]
		switch {
		case d.Up:
			id, ok = identity{d.Mode, d.Activity.Source}, true
		case ok && (d.Mode == "" && id.mode != "" || d.Activity.Source == "" && id.source != ""):
			if out == r {
				c := *r
				c.Devices = slices.Clone(r.Devices)
				out = &c
			}
			o := &out.Devices[i]
			if o.Mode == "" {
				o.Mode = id.mode
			}
			if o.Activity.Source == "" {
				o.Activity.Source = id.source
			}
		}
		if ok {
			known[d.UUID] = id
		}
	}
	s.known = known
	return out
}

// dropDuplicates returns r without the devices that repeat a GPU listed
// before them (the same UUID, or, without one, the same index; a copy
// when there are some), so that the builder, the collectors and the
// tuner all see one device per GPU, and the GPUs repeated, each once;
// called with s.mu held.
func (s *Sampler) dropDuplicates(r *Readings) (*Readings, []string) {
	if r == nil {
		return nil, nil
	}
	type key struct {
		uuid  string
		index int
	}
	keyOf := func(d *Device) key {
		if d.UUID != "" {
			return key{uuid: d.UUID}
		}
		return key{index: d.Index} // a GPU never identified
	}
	seen := make(map[key]bool, len(r.Devices))
	var keep []Device
	var dups []string
	for i := range r.Devices {
		d := &r.Devices[i]
		k := keyOf(d)
		if !seen[k] {
			seen[k] = true
			if keep != nil {
				keep = append(keep, *d)
			}
			continue
		}
		if keep == nil {
			keep = slices.Clone(r.Devices[:i])
		}
		s.stats.DuplicatesDropped++
		name := k.uuid
		if name == "" {
			name = "index " + strconv.Itoa(k.index)
		}
		if !slices.Contains(dups, name) {
			dups = append(dups, name)
		}
	}
	if keep == nil {
		return r, nil
	}
	c := *r
	c.Devices = keep
	return &c, dups
}
