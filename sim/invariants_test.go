package sim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestReadingsInvariants runs every scenario under scenarios and checks
// that the readings are what a real host could report.
func TestReadingsInvariants(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".tenants.yaml") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc := mustLoad(t, f)
			s := mustNew(t, sc, Options{})
			ctx := context.Background()
			prevCS := map[int]uint64{}
			prevE := map[int]float64{}
			start := s.Now()
			for sec := 0; sec <= 20; sec++ {
				s.AdvanceTo(start.Add(time.Duration(sec) * time.Second))
				r, err := s.Sample(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pids := map[uint32]bool{}
				for i := range r.Devices {
					checkDevice(t, sec, &r.Devices[i], pids, prevCS, prevE)
				}
			}
		})
	}
	if n < 2 {
		t.Fatalf("only %d scenarios found", n)
	}
}

func checkDevice(t *testing.T, sec int, d *gpu.Device, pids map[uint32]bool, prevCS map[int]uint64, prevE map[int]float64) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("t=%ds GPU %d: "+format, append([]any{sec, d.Index}, args...)...)
	}
	if !d.Up {
		return
	}
	ratio := func(name string, v *float64) {
		if v != nil && (*v < 0 || *v > 1) {
			fail("%s = %v outside [0,1]", name, *v)
		}
	}
	ratio("GPUUtil", d.GPUUtil)
	ratio("MemUtil", d.MemUtil)
	ratio("SMActive", d.Activity.SMActive)
	ratio("SMOccupancy", d.Activity.SMOccupancy)
	ratio("DRAMActive", d.Activity.DRAMActive)
	ratio("TensorActive", d.Activity.TensorActive)
	if d.MemoryUsedBytes > d.MemoryTotalBytes {
		fail("memory used %d > total %d", d.MemoryUsedBytes, d.MemoryTotalBytes)
	}
	if c := *d.SMClockHz / 1e6; c < 345 || c > 1980 {
		fail("SM clock %v MHz", c)
	}
	if p := d.PowerWatts; p == nil || *p < 50 || *p > *d.PowerLimitW*1.05 {
		fail("power %v W (limit %v)", *p, *d.PowerLimitW)
	}
	if cs := *d.ContextSwitchesTotal; cs < prevCS[d.Index] {
		fail("context switches went backwards")
	} else {
		prevCS[d.Index] = cs
	}
	if e := *d.EnergyJoules; e < prevE[d.Index] {
		fail("energy went backwards")
	} else {
		prevE[d.Index] = e
	}
	var procMem uint64
	smSum := 0.0
	for _, p := range d.Processes {
		if pids[p.PID] {
			fail("PID %d listed twice", p.PID)
		}
		pids[p.PID] = true
		procMem += *p.UsedMemoryBytes
		if p.Cgroup == "" || p.Name == "" {
			fail("process %d without cgroup or name", p.PID)
		}
		if d.MIGEnabled {
			if p.SMUtil != nil || d.MIGByGI(p.GPUInstanceID) == nil {
				fail("MIG process %d: utilization %v, instance %d", p.PID, p.SMUtil, p.GPUInstanceID)
			}
			continue
		}
		ratio("process SMUtil", p.SMUtil)
		ratio("process MemUtil", p.MemUtil)
		if p.SMUtil != nil {
			smSum += *p.SMUtil
		}
	}
	if procMem > d.MemoryUsedBytes {
		fail("processes hold %d bytes, device reports %d used", procMem, d.MemoryUsedBytes)
	}
	switch d.Mode {
	case gpu.SharingTimeSlice, gpu.SharingExclusive, gpu.SharingVGPU:
		// one context at a time: busy fractions add up to at most 1
		if smSum > 1.0001 {
			fail("time-sliced processes busy %.4f of the time together", smSum)
		}
	}
	for _, m := range d.MIG {
		if m.MemoryUsedBytes > m.MemoryTotalBytes {
			fail("MIG %s memory %d > %d", m.UUID, m.MemoryUsedBytes, m.MemoryTotalBytes)
		}
		ratio("MIG SMActive", m.Activity.SMActive)
		ratio("MIG DRAMActive", m.Activity.DRAMActive)
		ratio("MIG TensorActive", m.Activity.TensorActive)
		if !strings.HasPrefix(m.UUID, "MIG-") {
			fail("MIG UUID %q", m.UUID)
		}
	}
}

// TestGroundTruthMatchesReadings: over the same interval, the window's device
// figures equal the readings', and on a shared (non-MIG) GPU the tenants'
// SM shares add up to the device's SM activity.
func TestGroundTruthMatchesReadings(t *testing.T) {
	sc := mustLoad(t, filepath.Join(scenarioDir, "h100-timeslice.yaml"))
	s := mustNew(t, sc, Options{})
	ctx := context.Background()
	s.Sample(ctx)
	s.Window()
	s.AdvanceTo(s.Now().Add(30 * time.Second))
	r, _ := s.Sample(ctx)
	w := s.Window()
	d := r.Devices[0]
	g := w.GPUs[0]
	near := func(name string, a, b float64) {
		t.Helper()
		if diff := a - b; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s: window %.6f, readings %.6f", name, a, b)
		}
	}
	near("SM active", g.SMActive, *d.Activity.SMActive)
	near("DRAM active", g.DRAMActive, *d.Activity.DRAMActive)
	near("power", g.PowerW, *d.PowerWatts)
	sum := 0.0
	for _, tw := range w.Tenants {
		sum += tw.SMShare
	}
	near("sum of tenant SM shares", sum, *d.Activity.SMActive)
}
