package gpu

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kit/log"
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

// A GPU listed twice in a sample (its UUID; without one, its index) is
// kept once, the first copy: the subscribers and Latest see one device
// per GPU, the drops are counted, and the line saying so is rate-limited.
func TestSamplerDropsDuplicateGPUs(t *testing.T) {
	a0 := Device{Index: 0, UUID: "GPU-a", Up: true, Name: "first"}
	a1 := Device{Index: 1, UUID: "GPU-a", Up: true, Name: "second"}
	b := Device{Index: 2, UUID: "GPU-b", Up: true}
	anon := Device{Index: 3}
	twice := &Readings{Devices: []Device{a0, a1, b, anon, anon, a1}}
	src := &listSource{rs: []*Readings{twice, twice, {Devices: []Device{a0, b}}}}
	clk := NewManualClock(time.Unix(0, 0))
	var buf bytes.Buffer
	s := NewSampler(src, clk, time.Second, log.NewLogfmtLogger(&buf))
	var told [][]string
	s.Subscribe(func(r *Readings) {
		var names []string
		for _, d := range r.Devices {
			names = append(names, d.UUID+"/"+d.Name)
		}
		told = append(told, names)
	})
	for range 3 {
		if err := s.SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	want := [][]string{{"GPU-a/first", "GPU-b/", "/"}, {"GPU-a/first", "GPU-b/", "/"}, {"GPU-a/first", "GPU-b/"}}
	if !slices.EqualFunc(told, want, slices.Equal) {
		t.Errorf("subscribers told %v, want %v", told, want)
	}
	if got := len(s.Latest().Devices); got != 2 {
		t.Errorf("Latest has %d devices, want 2", got)
	}
	if got := s.Stats().DuplicatesDropped; got != 6 {
		t.Errorf("DuplicatesDropped %d, want 6 (3 in each of 2 samples)", got)
	}
	if len(twice.Devices) != 6 {
		t.Errorf("the source's readings were changed: %d devices", len(twice.Devices))
	}
	out := buf.String()
	if n := strings.Count(out, "level=warn"); n != 1 || !strings.Contains(out, `gpus="GPU-a,index 3"`) {
		t.Errorf("want one warning naming GPU-a and index 3, the repeat at debug level; log:\n%s", out)
	}
}
