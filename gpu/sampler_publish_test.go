package gpu

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// A failed sample tells the failures' subscribers, with the figures as of
// it; the readings' subscribers hear of successes only.
func TestSamplerTellsFailures(t *testing.T) {
	boom := errors.New("boom")
	src := &scriptedSource{errs: []error{nil, boom, boom, nil, boom}}
	s := NewSampler(src, NewManualClock(time.Unix(1000, 0)), time.Second, nil)
	var good int
	var failed []SamplerStats
	s.Subscribe(func(*Readings) { good++ })
	s.SubscribeFailures(func(st SamplerStats) { failed = append(failed, st) })
	for range 5 {
		_ = s.SampleOnce(context.Background())
	}
	if good != 2 {
		t.Errorf("readings' subscribers told %d times, want 2", good)
	}
	var got [][2]uint64
	for _, st := range failed {
		if st.LastError != "boom" {
			t.Errorf("a failure told with LastError %q", st.LastError)
		}
		got = append(got, [2]uint64{st.SamplesTotal, uint64(st.ConsecutiveErr)})
	}
	if want := [][2]uint64{{2, 1}, {3, 2}, {5, 1}}; !slices.Equal(got, want) {
		t.Errorf("failures told (samples, in a row) %v, want %v", got, want)
	}
}

// The time the subscribers take (building and publishing the snapshot,
// rendering the pages) is the sample's publication time, a failure's
// included; the backend's call alone is LastDuration.
func TestSamplerTimesPublication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		src := &scriptedSource{errs: []error{nil, boom}}
		s := NewSampler(src, NewManualClock(time.Unix(1000, 0)), 100*time.Millisecond, nil)
		s.Subscribe(func(*Readings) { time.Sleep(250 * time.Millisecond) })
		s.SubscribeFailures(func(SamplerStats) { time.Sleep(40 * time.Millisecond) })
		for _, want := range []time.Duration{250 * time.Millisecond, 40 * time.Millisecond} {
			_ = s.SampleOnce(context.Background())
			st := s.Stats()
			if st.PublishDuration != want || st.LastDuration != 0 {
				t.Errorf("publication %v and sample %v, want %v and 0", st.PublishDuration, st.LastDuration, want)
			}
		}
	})
}
