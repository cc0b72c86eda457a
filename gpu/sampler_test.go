package gpu

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
)

type scriptedSource struct {
	mu    sync.Mutex
	errs  []error // consumed in order; nil entry = success
	calls int
}

func (s *scriptedSource) Name() string { return "scripted" }
func (s *scriptedSource) Close() error { return nil }
func (s *scriptedSource) Sample(context.Context) (*Readings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	if err != nil {
		return nil, err
	}
	return &Readings{Backend: "scripted", Devices: []Device{{Index: s.calls}}}, nil
}

func TestSamplerCountsErrorsAndKeepsLastGood(t *testing.T) {
	boom := errors.New("boom")
	src := &scriptedSource{errs: []error{nil, boom, boom, nil}}
	clk := NewManualClock(time.Unix(1000, 0))
	s := NewSampler(src, clk, time.Second, nil)
	var got []int
	s.Subscribe(func(r *Readings) { got = append(got, r.Devices[0].Index) })

	wantErr := []bool{false, true, true, false}
	for i, we := range wantErr {
		err := s.SampleOnce(context.Background())
		if (err != nil) != we {
			t.Fatalf("sample %d: err=%v, want error=%v", i, err, we)
		}
		if i == 1 && s.Latest().Devices[0].Index != 1 {
			t.Fatalf("after a failure Latest should keep the last good readings")
		}
	}
	st := s.Stats()
	if st.SamplesTotal != 4 || st.ErrorsTotal != 2 || st.ConsecutiveErr != 0 || st.LastError != "" {
		t.Fatalf("stats = %+v", st)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Fatalf("subscribers saw %v, want [1 4]", got)
	}
}

// TestSamplerStatsCarryItsInterval: the stats say the interval the sampler
// was made with (served as vgpu_sample_interval_seconds, the samples a
// second asked for), before any sample and after; a non-positive interval
// is the default 1s the sampler runs at.
func TestSamplerStatsCarryItsInterval(t *testing.T) {
	for _, tc := range []struct{ interval, want time.Duration }{
		{10 * time.Second, 10 * time.Second},
		{250 * time.Millisecond, 250 * time.Millisecond},
		{0, time.Second},
	} {
		s := NewSampler(&scriptedSource{}, NewManualClock(time.Unix(1000, 0)), tc.interval, nil)
		if got := s.Stats().Interval; got != tc.want {
			t.Errorf("NewSampler(%s): before a sample, Stats().Interval = %s, want %s", tc.interval, got, tc.want)
		}
		if err := s.SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := s.Stats().Interval; got != tc.want {
			t.Errorf("NewSampler(%s): after a sample, Stats().Interval = %s, want %s", tc.interval, got, tc.want)
		}
	}
}

func TestSamplerRunFollowsInjectedClock(t *testing.T) {
	src := &scriptedSource{}
	clk := NewManualClock(time.Unix(0, 0))
	s := NewSampler(src, clk, 10*time.Second, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()

	waitWaiters := func() {
		deadline := time.Now().Add(5 * time.Second)
		for clk.Waiters() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("sampler never parked on the clock")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := 0; i < 3; i++ {
		waitWaiters()
		clk.Advance(10 * time.Second)
	}
	waitWaiters()
	cancel()
	<-done
	if n := s.Stats().SamplesTotal; n != 4 {
		t.Fatalf("samples = %d, want 4 (one at start, one per interval)", n)
	}
	if !s.Stats().LastSuccess.Equal(time.Unix(30, 0)) {
		t.Fatalf("LastSuccess = %v, want virtual time 30s", s.Stats().LastSuccess)
	}
}

// slowSource is a source whose samples are slow passes.
type slowSource struct{ *SlowPasses }

func (s slowSource) Name() string { return "slow" }
func (s slowSource) Close() error { return nil }
func (s slowSource) Sample(context.Context) (*Readings, error) {
	s.Pass()
	return &Readings{Backend: "slow"}, nil
}

// The samples start every interval, whatever each takes: one that takes
// part of the interval does not push the next ones later (a 1 s interval
// and samples of 300 ms gave a sample every 1.3 s), and one that takes
// longer than the interval is followed at the next whole interval.
func TestSamplerKeepsItsCadence(t *testing.T) {
	for _, tc := range []struct {
		took time.Duration
		want []time.Duration
	}{
		{300 * time.Millisecond, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}},
		{1500 * time.Millisecond, []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}},
	} {
		clk := NewManualClock(time.Unix(0, 0))
		src := slowSource{&SlowPasses{Clock: clk, Took: tc.took}}
		s := NewSampler(src, clk, time.Second, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		if err := clk.Drive(100*time.Millisecond, func() bool { return len(src.Starts()) >= len(tc.want) }, 10*time.Second); err != nil {
			t.Fatal("sampler never parked: ", err)
		}
		cancel()
		<-done
		if got := src.Starts(); !slices.Equal(got, tc.want) {
			t.Errorf("samples of %v started at %v, want %v", tc.took, got, tc.want)
		}
	}
}

func TestManualClockFiresInOrderAndNotEarly(t *testing.T) {
	clk := NewManualClock(time.Unix(0, 0))
	a := clk.After(2 * time.Second)
	b := clk.After(time.Second)
	clk.Advance(500 * time.Millisecond)
	select {
	case <-a:
		t.Fatal("fired early")
	case <-b:
		t.Fatal("fired early")
	default:
	}
	clk.Advance(time.Second)
	if got := <-b; !got.Equal(time.Unix(1, 500e6)) {
		t.Fatalf("b fired at %v", got)
	}
	select {
	case <-a:
		t.Fatal("a fired early")
	default:
	}
	clk.Set(time.Unix(-5, 0)) // never backwards
	if !clk.Now().Equal(time.Unix(1, 500e6)) {
		t.Fatal("clock moved backwards")
	}
}

// A sample cut short by shutdown is no failure: not counted, not logged.
func TestSamplerIgnoresErrorsAfterCancel(t *testing.T) {
	src := &scriptedSource{errs: []error{context.Canceled}}
	var logged []any
	logger := loggerFunc(func(kv ...any) error { logged = append(logged, kv...); return nil })
	s := NewSampler(src, NewManualClock(time.Unix(1000, 0)), time.Second, logger)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.SampleOnce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if st := s.Stats(); st.SamplesTotal != 0 || st.ErrorsTotal != 0 || st.LastError != "" {
		t.Errorf("a cancelled sample was counted: %+v", st)
	}
	if len(logged) != 0 {
		t.Errorf("a cancelled sample was logged: %v", logged)
	}
}

type loggerFunc func(...any) error

func (f loggerFunc) Log(kv ...any) error { return f(kv...) }

// listSource returns its readings in order, the last one again once they
// are used up.
type listSource struct{ rs []*Readings }

func (s *listSource) Name() string { return "list" }
func (s *listSource) Close() error { return nil }
func (s *listSource) Sample(context.Context) (*Readings, error) {
	r := s.rs[0]
	if len(s.rs) > 1 {
		s.rs = s.rs[1:]
	}
	return r, nil
}

// A lost GPU's reading has no mode or activity source: the sampler gives
// it those of the GPU's last good reading, so that vgpu_gpu_info keeps its
// labels while the GPU is lost, without changing the source's readings;
// a GPU never read up, or no longer listed, gets none.
func TestSamplerKeepsLostGPUIdentity(t *testing.T) {
	up := Device{UUID: "GPU-a", Up: true, Mode: SharingMPS, Activity: Activity{Source: "gpm"}}
	other := Device{UUID: "GPU-b", Up: true, Mode: SharingTimeSlice}
	lost := Device{UUID: "GPU-a", Err: "GPU is lost"}
	neverUp := Device{UUID: "GPU-c", Err: "GPU is lost"}
	lostReading := &Readings{Devices: []Device{lost, other, neverUp}}
	src := &listSource{rs: []*Readings{
		{Devices: []Device{up, other, neverUp}},
		lostReading,
		lostReading,
		{Devices: []Device{other}},
		{Devices: []Device{lost}},
	}}
	s := NewSampler(src, NewManualClock(time.Unix(0, 0)), time.Second, nil)
	type ident struct {
		mode   SharingMode
		source string
	}
	want := [][]ident{
		{{SharingMPS, "gpm"}, {SharingTimeSlice, ""}, {"", ""}},
		{{SharingMPS, "gpm"}, {SharingTimeSlice, ""}, {"", ""}},
		{{SharingMPS, "gpm"}, {SharingTimeSlice, ""}, {"", ""}},
		{{SharingTimeSlice, ""}},
		{{"", ""}}, // GPU-a was not listed in between: forgotten
	}
	for i, w := range want {
		if err := s.SampleOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []ident
		for _, d := range s.Latest().Devices {
			got = append(got, ident{d.Mode, d.Activity.Source})
		}
		if !slices.Equal(got, w) {
			t.Errorf("sample %d: %v, want %v", i, got, w)
		}
	}
	if d := lostReading.Devices[0]; d.Mode != "" || d.Activity.Source != "" {
		t.Errorf("the source's readings were changed: %+v", d)
	}
}

// hangingSource is a source whose Sample blocks until release is closed,
// as a driver call that hangs does.
type hangingSource struct{ release chan struct{} }

func (s hangingSource) Name() string { return "hanging" }
func (s hangingSource) Close() error { return nil }
func (s hangingSource) Sample(context.Context) (*Readings, error) {
	<-s.release
	return &Readings{Backend: "hanging"}, nil
}

// A sample that does not return counts no error and changes no series:
// the log says it hangs once it has run stuckAfter, and when it returns.
// One that returns in time logs nothing.
func TestSamplerLogsHangingSample(t *testing.T) {
	var buf bytes.Buffer
	logger := log.NewLogfmtLogger(log.NewSyncWriter(&syncBuffer{b: &buf}))
	src := hangingSource{release: make(chan struct{})}
	s := NewSampler(src, NewManualClock(time.Unix(0, 0)), time.Second, logger)
	s.stuckAfter = 20 * time.Millisecond
	done := make(chan error)
	go func() { done <- s.SampleOnce(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logged(&buf), `msg="sample has not returned`) {
		if time.Now().After(deadline) {
			t.Fatalf("no line for a sample that hangs; log:\n%s", logged(&buf))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logged(&buf), "backend=hanging") {
		t.Errorf("the line does not name the backend: %s", logged(&buf))
	}
	close(src.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged(&buf), `msg="sample returned after hanging"`) {
		t.Errorf("no line when the hanging sample returned; log:\n%s", logged(&buf))
	}

	logMu.Lock()
	buf.Reset()
	logMu.Unlock()
	fast := NewSampler(&scriptedSource{}, NewManualClock(time.Unix(0, 0)), time.Second, logger)
	fast.stuckAfter = time.Hour
	if err := fast.SampleOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logged(&buf); got != "" {
		t.Errorf("a sample in time logged %q", got)
	}
}

var logMu sync.Mutex

// syncBuffer guards b with logMu, so that the test reads what the
// sampler's timer goroutine writes.
type syncBuffer struct{ b *bytes.Buffer }

func (w *syncBuffer) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	return w.b.Write(p)
}

func logged(b *bytes.Buffer) string {
	logMu.Lock()
	defer logMu.Unlock()
	return b.String()
}
