package collector

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// moved is richSnapshot a sample later: the same series with other values.
func moved() *tenant.Snapshot {
	s := richSnapshot()
	s.Sampler.SamplesTotal++
	for i := range s.Readings.Devices {
		d := &s.Readings.Devices[i]
		d.MemoryUsedBytes += gib
		if d.Activity.SMActive != nil {
			d.Activity.SMActive = gpu.Float(*d.Activity.SMActive / 2)
		}
	}
	for i := range s.Usage {
		u := &s.Usage[i]
		u.MemoryUsedBytes += gib
		u.Processes++
		if u.ContextSwitchesTotal != nil {
			u.ContextSwitchesTotal = gpu.Float(*u.ContextSwitchesTotal + 1)
		}
	}
	s.SLOs[0].RequestsTotal += 10
	return s
}

// churned is richSnapshot with a tenant gone, one renamed, and a label
// value that cannot be served.
func churned() *tenant.Snapshot {
	s := richSnapshot()
	s.Tenants = s.Tenants[:1]
	s.Usage[1].Tenant = "train-2"
	s.Usage = append(s.Usage, s.Usage[0])
	s.Usage[len(s.Usage)-1].GPUInstance = "bad\xff"
	s.Readings.Devices = s.Readings.Devices[1:]
	return s
}

// TestSeriesCacheServesConstMetrics renders a sequence of snapshots with
// one Exporter, whose collectors serve the series they sent before from
// their caches, and each snapshot with a new Exporter, whose collectors
// build every metric with prometheus.NewConstMetric: the two renderings
// are the same, byte for byte, however the series change between
// snapshots.
func TestSeriesCacheServesConstMetrics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snaps []func() *tenant.Snapshot
	}{
		{"values move", []func() *tenant.Snapshot{richSnapshot, moved, richSnapshot, moved}},
		{"series come and go", []func() *tenant.Snapshot{richSnapshot, churned, moved, churned, richSnapshot}},
		{"other snapshots between", []func() *tenant.Snapshot{
			richSnapshot,
			func() *tenant.Snapshot { return bigSnapshot(2, 5) },
			moved,
			func() *tenant.Snapshot { return &tenant.Snapshot{} },
			func() *tenant.Snapshot { return bigSnapshot(8, 32) },
			func() *tenant.Snapshot { return bigSnapshot(8, 32) },
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cur atomic.Pointer[tenant.Snapshot]
			cached, err := NewExporter(cur.Load, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := withoutDurations(t, cached)
			for i, snap := range tc.snaps {
				s := snap()
				cur.Store(s)
				got := format(t, g)
				want := format(t, withoutDurations(t, newExporter(t, s)))
				if !bytes.Equal(got, want) {
					t.Fatalf("snapshot %d: cached rendering\n%s\ndiffers from the const metrics'\n%s", i, got, want)
				}
			}
			// Only the last snapshot's series stay cached: all it sent
			// but the Exporter's own.
			mfs, err := g.Gather()
			if err != nil {
				t.Fatal(err)
			}
			want := -len(cached.collectors) // their success
			for _, mf := range mfs {
				want += len(mf.Metric)
			}
			n := 0
			for _, c := range cached.collectors {
				n += c.(interface{ cachedSeries() int }).cachedSeries()
			}
			if n != want {
				t.Errorf("%d series cached after the last snapshot, want %d", n, want)
			}
		})
	}
}

// cachedSeries is how many series the collector keeps.
func (s *descSet) cachedSeries() int { return len(s.series.series) }

// TestSeriesCacheConcurrentCollections gathers one Exporter from several
// goroutines while the snapshot changes: the collectors' updates take
// turns over their caches (the race detector watches), and every
// rendering is one of the snapshots', whole.
func TestSeriesCacheConcurrentCollections(t *testing.T) {
	snaps := []*tenant.Snapshot{richSnapshot(), moved(), churned()}
	var want [][]byte
	for _, s := range snaps {
		want = append(want, format(t, withoutDurations(t, newExporter(t, s))))
	}
	var cur atomic.Pointer[tenant.Snapshot]
	cur.Store(snaps[0])
	e, err := NewExporter(cur.Load, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := withoutDurations(t, e)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 30 {
				if (i+j)%4 == 0 {
					cur.Store(snaps[(i+j)%len(snaps)])
				}
				got := format(t, g)
				for _, w := range want {
					if bytes.Equal(got, w) {
						got = nil
						break
					}
				}
				if got != nil {
					t.Errorf("a rendering is none of the snapshots':\n%s", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// The first update caches nothing (an Exporter built for one filtered
// scrape has no use for it); the second caches every series it sends.
func TestSeriesCacheFromSecondUpdate(t *testing.T) {
	e := newExporter(t, richSnapshot())
	cached := func() int {
		n := 0
		for _, c := range e.collectors {
			n += c.(interface{ cachedSeries() int }).cachedSeries()
		}
		return n
	}
	g := withoutDurations(t, e)
	format(t, g)
	if n := cached(); n != 0 {
		t.Errorf("%d series cached after the first update, want none", n)
	}
	format(t, g)
	if n := cached(); n == 0 {
		t.Error("no series cached after the second update")
	}
}
