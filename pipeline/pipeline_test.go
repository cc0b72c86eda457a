package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// failingSource answers its first failAfter samples, then fails.
type failingSource struct {
	samples   atomic.Int32
	failAfter int32
}

func (s *failingSource) Name() string { return "fake" }
func (s *failingSource) Sample(context.Context) (*gpu.Readings, error) {
	if s.samples.Add(1) > s.failAfter {
		return nil, errors.New("no GPU answered")
	}
	return &gpu.Readings{Backend: "fake"}, nil
}
func (s *failingSource) Close() error { return nil }

// snapshots builds empty snapshots; it has no tenants file.
type snapshots struct{}

func (snapshots) Build(r *gpu.Readings, st gpu.SamplerStats) *tenant.Snapshot {
	return &tenant.Snapshot{Readings: r, Sampler: st}
}
func (snapshots) Reload(string) error { return errors.New("unexpected reload") }

// Failed samples publish no snapshot, yet the exported sampler figures
// follow them.
func TestSnapshotCarriesLiveSamplerStats(t *testing.T) {
	src := &failingSource{failAfter: 1}
	svc := New(src, snapshots{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	if svc.Snapshot() != nil {
		t.Fatal("snapshot before any sample")
	}
	ctx := context.Background()
	if err := svc.Sampler().SampleOnce(ctx); err != nil {
		t.Fatal(err)
	}
	first := svc.Snapshot()
	if first == nil || first.Sampler.SamplesTotal != 1 || first.Sampler.ErrorsTotal != 0 {
		t.Fatalf("after one good sample: %+v", first)
	}
	if svc.Snapshot() != first {
		t.Error("unchanged figures should return the published snapshot itself")
	}
	for range 2 {
		if err := svc.Sampler().SampleOnce(ctx); err == nil {
			t.Fatal("expected a failed sample")
		}
	}
	got := svc.Snapshot()
	if got.Sampler.SamplesTotal != 3 || got.Sampler.ErrorsTotal != 2 || got.Sampler.ConsecutiveErr != 2 || got.Sampler.LastError == "" {
		t.Errorf("sampler figures after two failures: %+v", got.Sampler)
	}
	if got.Readings != first.Readings {
		t.Error("the last good readings should stay published")
	}
	if first.Sampler.ErrorsTotal != 0 {
		t.Error("the published snapshot was modified")
	}
}

// probe is a builder that, while it builds, records what the pipeline's
// Snapshot returns.
type probe struct {
	p      *Pipeline
	during []*tenant.Snapshot
}

func (b *probe) Build(r *gpu.Readings, st gpu.SamplerStats) *tenant.Snapshot {
	b.during = append(b.during, b.p.Snapshot())
	return &tenant.Snapshot{Readings: r, Sampler: st}
}
func (*probe) Reload(string) error { return errors.New("unexpected reload") }

// While a successful sample's snapshot is being built, Snapshot stays the
// published one (the version the exporter renders does not move twice per
// sample); after failures it carries the sampler's figures, as before.
func TestSnapshotStillWhileBuilding(t *testing.T) {
	b := &probe{}
	src := &failingSource{failAfter: 3}
	svc := New(src, b, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	b.p = svc
	ctx := context.Background()
	var published []*tenant.Snapshot
	for range 3 {
		if err := svc.Sampler().SampleOnce(ctx); err != nil {
			t.Fatal(err)
		}
		published = append(published, svc.Published())
	}
	for i := 1; i < 3; i++ {
		if b.during[i] != published[i-1] {
			t.Errorf("sample %d: during its build Snapshot returned %p, want the published %p", i+1, b.during[i], published[i-1])
		}
	}
	if err := svc.Sampler().SampleOnce(ctx); err == nil {
		t.Fatal("expected a failed sample")
	}
	if got := svc.Snapshot(); got == published[2] || got.Sampler.ErrorsTotal != 1 {
		t.Errorf("after a failure: %+v, want a copy with the error counted", got.Sampler)
	}
}

// Without a tenants file a reload reads nothing.
func TestReloadWithoutFile(t *testing.T) {
	p := New(&failingSource{}, snapshots{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	if err := p.Reload(); !errors.Is(err, ErrNothingToReload) {
		t.Fatalf("reload: %v", err)
	}
}

// slowReloads is a builder whose reloads wait for release; each returns
// errs[n] (n the reload's number from 0), nil past the end.
type slowReloads struct {
	snapshots
	entered chan struct{}
	release chan struct{}
	errs    []error
	n       atomic.Int64
}

func (b *slowReloads) Reload(string) error {
	n := b.n.Add(1) - 1
	b.entered <- struct{}{}
	<-b.release
	if int(n) < len(b.errs) {
		return b.errs[n]
	}
	return nil
}

// Reloads asked for while one runs share the next one: a burst costs
// two reads of the file, not one each, and none of them gets the outcome
// of the reload that began before it asked (that one may have read the
// file before it changed).
func TestReloadsCoalesce(t *testing.T) {
	b := &slowReloads{entered: make(chan struct{}, 64), release: make(chan struct{}), errs: []error{errors.New("t.yaml:3: the old file")}}
	p := New(&failingSource{}, b, "t.yaml", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	first := make(chan error, 1)
	go func() { first <- p.Reload() }()
	<-b.entered // the first reload reads the file
	const burst = 10
	var asked sync.WaitGroup
	errs := make(chan error, burst)
	for range burst {
		asked.Add(1)
		go func() {
			asked.Done()
			errs <- p.Reload()
		}()
	}
	asked.Wait()
	time.Sleep(100 * time.Millisecond) // for them to ask (not a bound on anything)
	go func() {
		for range b.entered {
		}
	}()
	close(b.release)
	if err := <-first; err == nil {
		t.Error("the first reload lost its error")
	}
	for range burst {
		if err := <-errs; err != nil {
			t.Errorf("a reload asked for during the first got its outcome: %v", err)
		}
	}
	close(b.entered)
	if n := b.n.Load(); n > 3 {
		t.Errorf("%d reads of the file for 1 + %d reloads asked together, want 2 (3 with a late asker)", n, burst)
	}
}

// reloader is a file added by AlsoReload whose reloads return err.
type reloader struct {
	err error
	n   int
}

func (r *reloader) Reload() error { r.n++; return r.err }

// tenantsReloads is a builder whose reloads of the tenants file return err.
type tenantsReloads struct {
	snapshots
	err error
}

func (b tenantsReloads) Reload(string) error { return b.err }

// A reload, by SIGHUP too, rereads the files added by AlsoReload before
// the tenants file, without one too: its error joins those of the files
// that failed, each once, and a file that succeeded is logged as reloaded.
func TestAlsoReload(t *testing.T) {
	webErr, tenantsErr := errors.New("web.yml: yaml: line 2: bad"), errors.New("t.yaml:3: bad")
	for _, tc := range []struct {
		name            string
		tenantsFile     string
		web, tenants    error
		want            []error // nil: the reload succeeds
		wantWebReloaded bool
	}{
		{"web only, good", "", nil, nil, nil, true},
		{"web only, bad", "", webErr, nil, []error{webErr}, false},
		{"both good", "t.yaml", nil, nil, nil, true},
		{"web bad", "t.yaml", webErr, nil, []error{webErr}, false},
		{"tenants bad", "t.yaml", nil, tenantsErr, []error{tenantsErr}, true},
		{"both bad", "t.yaml", webErr, tenantsErr, []error{webErr, tenantsErr}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := log.NewLogfmtLogger(&buf)
			p := New(&failingSource{}, tenantsReloads{err: tc.tenants}, tc.tenantsFile, gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, logger)
			web := &reloader{err: tc.web}
			p.AlsoReload("web configuration", web, log.With(logger, "component", "web"))
			hup := make(chan os.Signal)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); p.ReloadOnSignal(ctx, hup) }()
			hup <- syscall.SIGHUP
			hup <- syscall.SIGHUP // taken once the first reload is done
			cancel()
			<-done // after the second reload
			logs := buf.String()
			if n := strings.Count(logs, `component=web msg="web configuration reloaded"`); tc.wantWebReloaded != (n == 2) || n%2 != 0 {
				t.Errorf("the web configuration logged as reloaded %d times by 2 SIGHUPs, want it %v:\n%s", n, tc.wantWebReloaded, logs)
			}
			if n := strings.Count(logs, "source=SIGHUP"); n != 2 {
				t.Errorf("2 SIGHUPs' outcomes logged %d times:\n%s", n, logs)
			}
			for _, w := range tc.want {
				if n := strings.Count(logs, w.Error()); n != 2 {
					t.Errorf("%q logged %d times by 2 SIGHUPs, want once each:\n%s", w, n, logs)
				}
			}
			err := p.Reload()
			if web.n != 3 {
				t.Errorf("%d reloads of the web configuration for 3 reloads", web.n)
			}
			if (err == nil) != (tc.want == nil) {
				t.Fatalf("reload: %v, want %v", err, tc.want)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) || strings.Count(err.Error(), w.Error()) != 1 {
					t.Errorf("reload: %q, want %q in it once", err, w)
				}
			}
		})
	}
}

// seqSource numbers its samples from 1: those in fail fail, the others
// read their number as the backend's name.
type seqSource struct {
	n    atomic.Int32
	fail map[int32]bool
}

func (s *seqSource) Name() string { return "seq" }
func (s *seqSource) Sample(context.Context) (*gpu.Readings, error) {
	n := s.n.Add(1)
	if s.fail[n] {
		return nil, errors.New("no GPU answered")
	}
	return &gpu.Readings{Backend: strconv.Itoa(int(n))}, nil
}
func (s *seqSource) Close() error { return nil }

// A failed sample runs the publication's subscribers, once a snapshot has
// been published (before, nothing is served), with Snapshot carrying its
// figures: a page rendered then shows them.
func TestFailedSamplePublishesItsFigures(t *testing.T) {
	svc := New(&seqSource{fail: map[int32]bool{1: true, 3: true, 4: true}}, snapshots{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Second, log.NewNopLogger())
	var seen []string // what each publication's Snapshot says: sample read, samples, errors in a row
	svc.Subscribe(func() {
		s := svc.Snapshot()
		seen = append(seen, fmt.Sprintf("%s %d %d", s.Readings.Backend, s.Sampler.SamplesTotal, s.Sampler.ConsecutiveErr))
	})
	for range 4 {
		_ = svc.Sampler().SampleOnce(context.Background())
	}
	if want := []string{"2 2 0", "2 3 1", "2 4 2"}; !slices.Equal(seen, want) {
		t.Errorf("publications saw %q, want %q", seen, want)
	}
}

// A good sample after failures: while its snapshot is being built, the
// published one keeps the figures of the last failure (those of its own
// readings' time), never the new sample's time with no error on the old
// readings; the new figures come with the new snapshot.
func TestRecoveryFiguresComeWithTheirSnapshot(t *testing.T) {
	b := &probe{}
	clk := gpu.NewManualClock(time.Unix(1e9, 0))
	svc := New(&seqSource{fail: map[int32]bool{2: true}}, b, "", clk, time.Second, log.NewNopLogger())
	b.p = svc
	var at []time.Time
	for range 3 {
		at = append(at, clk.Now())
		_ = svc.Sampler().SampleOnce(context.Background())
		clk.Advance(time.Minute)
	}
	type figures struct {
		read                  string
		lastSuccess           time.Time
		samples, errs, inARow int
	}
	of := func(s *tenant.Snapshot) figures {
		st := s.Sampler
		return figures{s.Readings.Backend, st.LastSuccess, int(st.SamplesTotal), int(st.ErrorsTotal), st.ConsecutiveErr}
	}
	if got, want := of(b.during[1]), (figures{"1", at[0], 2, 1, 1}); got != want {
		t.Errorf("while sample 3 was built: %+v, want %+v", got, want)
	}
	if got, want := of(svc.Snapshot()), (figures{"3", at[2], 3, 1, 0}); got != want {
		t.Errorf("after sample 3: %+v, want %+v", got, want)
	}
}

// slowSnapshots builds as snapshots does, taking build to.
type slowSnapshots struct {
	snapshots
	build time.Duration
}

func (b slowSnapshots) Build(r *gpu.Readings, st gpu.SamplerStats) *tenant.Snapshot {
	time.Sleep(b.build)
	return b.snapshots.Build(r, st)
}

// The time a snapshot's build and publication take is served with the
// sampler's figures (vgpu_sample_publish_duration_seconds), apart from
// the backend's call: a slow build is not the driver's.
func TestSnapshotBuildTimeServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := New(&seqSource{}, slowSnapshots{build: 250 * time.Millisecond}, "", gpu.NewManualClock(time.Unix(1e9, 0)), 100*time.Millisecond, log.NewNopLogger())
		svc.Subscribe(func() { time.Sleep(50 * time.Millisecond) }) // the pages' renders
		for range 2 {
			if err := svc.Sampler().SampleOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if st := svc.Snapshot().Sampler; st.PublishDuration != 300*time.Millisecond || st.LastDuration != 0 {
			t.Errorf("publication %v and sample %v served, want 300ms and 0", st.PublishDuration, st.LastDuration)
		}
	})
}
