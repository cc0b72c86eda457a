package tenant

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/dcgmexp"
)

// lumpInner is an NVML source that never reads the GPU's energy counter:
// dcgm-exporter's page fills it.
type lumpInner struct {
	at    time.Time
	limit *float64
}

func (l *lumpInner) Name() string { return "nvml" }
func (l *lumpInner) Close() error { return nil }
func (l *lumpInner) Sample(context.Context) (*gpu.Readings, error) {
	return &gpu.Readings{Backend: "nvml", Time: l.at, Interval: time.Second,
		Devices: []gpu.Device{{UUID: "GPU-0", Up: true, Mode: gpu.SharingTimeSlice, PowerWatts: gpu.Float(300), PowerLimitW: l.limit}}}, nil
}

// The GPU draws 300 W throughout; dcgm-exporter's page shows its counter
// as at the page's last collection, and the exporter samples every second.
// Tenant a is busy in the samples where the page moves, b in the others.
// Each copy of the counter was a reading with an increase of 0, and the
// whole step went to the one sample where the page moved: with the default
// -c 30000, b, busy 58 s of 60, was billed 0 J and a, busy 2 s, all
// 18000 J. A copy (EnergyRepeated) is now a sample read without the
// counter, owed its part of the step: each tenant gets 300 J a second busy.
// The step passes the bound on a jump (twice the power limit over the 30 s
// since the last reading and 5 min), and the counter is served at every
// sample.
func TestMeterPageEnergySpreadOverCopies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		moves func(i int) bool // whether the page moved at sample i
		limit *float64
	}{
		{"-c 30000", func(i int) bool { return i%30 == 0 }, gpu.Float(350)},
		{"-c 30000, power limit not read", func(i int) bool { return i%30 == 0 }, nil},
		// -c 1000 collected out of phase with the samples: steps of 0 and 2 s
		{"-c 1000, out of phase", func(i int) bool { return i%2 == 0 }, gpu.Float(350)},
		{"-c 1000, in phase", func(int) bool { return true }, gpu.Float(350)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var page atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-0\"} %s\n", page.Load())
			}))
			defer srv.Close()
			inner := &lumpInner{at: time.Unix(1000, 0), limit: tc.limit}
			s, err := dcgmexp.New(inner, dcgmexp.Options{URL: srv.URL, Clock: gpu.NewManualClock(inner.at)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			m := newMeterState()
			var meters []Meter
			var gpus []GPUMeter
			want := map[string]float64{}
			collected := 0
			for i := 0; i <= 60; i++ {
				if tc.moves(i) {
					collected = i
				}
				counter := 1e6 + 300*float64(collected) // J
				page.Store(fmt.Sprintf("%.0f", counter*1000))
				rd, err := s.Sample(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if e := rd.Devices[0].EnergyJoules; e == nil || *e != counter {
					t.Fatalf("sample %d: energy counter served %v, want %.0f J", i, e, counter)
				}
				busy := "b"
				if tc.moves(i) {
					busy = "a"
				}
				if i > 0 {
					want[busy] += 300
				}
				a, b := 0.0, 1.0
				if busy == "a" {
					a, b = 1, 0
				}
				meters, gpus = m.meter(IdleToIdle, nil, rd, []Usage{{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(a)}, {Tenant: "b", UUID: "GPU-0", SMActive: gpu.Float(b)}})
				inner.at = inner.at.Add(time.Second)
			}
			for _, mt := range meters {
				if math.Abs(mt.EnergyJoules-want[mt.Tenant]) > 1e-6 {
					t.Errorf("tenant %s billed %.1f J, want %.1f J (300 W over its seconds busy)", mt.Tenant, mt.EnergyJoules, want[mt.Tenant])
				}
			}
			if g := gpus[0]; math.Abs(g.EnergyJoules-18000) > 1e-6 || g.IdleEnergyJoules > 1e-6 {
				t.Errorf("GPU metered %.1f J (idle %.1f J), want the counter's 18000 J increase, none idle", g.EnergyJoules, g.IdleEnergyJoules)
			}
		})
	}
}

// A copy of a reading the meter never metered is a reading to it: the
// sample where the copy's counter moved is one the meter left out (its
// time not after the last metered: the clock stepped back), and the copy
// that follows carries the increase since the meter's last reading.
func TestMeterCopyOfUnmeteredReadingTaken(t *testing.T) {
	m := newMeterState()
	usage := []Usage{{Tenant: "a", UUID: "GPU-0", SMActive: gpu.Float(1)}}
	sample := func(sec int64, joules float64, repeated bool) []Meter {
		rd := &gpu.Readings{Time: time.Unix(sec, 0), Interval: time.Second, Devices: []gpu.Device{{UUID: "GPU-0", Up: true,
			EnergyJoules: gpu.Float(joules), EnergyRepeated: repeated}}}
		meters, _ := m.meter(IdleToIdle, nil, rd, usage)
		return meters
	}
	sample(100, 1000, false)
	sample(100, 1300, false) // not after the last: left out
	if got := sample(101, 1300, true)[0].EnergyJoules; got != 300 {
		t.Errorf("tenant a billed %.0f J, want the 300 J the copy's counter moved since the last reading metered", got)
	}
}
