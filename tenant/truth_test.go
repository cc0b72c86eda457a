package tenant_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

var shareTable = flag.Bool("share-table", false, "print the share error table of docs/share-accuracy.md (TestSharesConserveAndTrack)")

// raceEnabled is set when the tests run with -race: then each scenario
// runs for its first raceRun only and the error bounds are not checked;
// the full runs are in the effects target (make effects).
var raceEnabled = false

const raceRun = time.Minute

// truthSample is the sample period of the full runs: model time between
// two samples.
const truthSample = 5 * time.Second

// conserveTol is the rounding a split may lose: the tenants of a share
// domain add up to the domain's figure within it.
const conserveTol = 1e-9

// smErrMax and hbmErrMax bound the mean absolute error of a tenant's
// apportioned SM and HBM shares against the simulator's ground truth over
// a run, a little above the worst that docs/share-accuracy.md reports: a rule (or
// a simulator change) that makes any tenant's figure worse fails here.
const (
	smErrMax  = 0.19
	hbmErrMax = 0.16
)

// domainKey is a share domain: a GPU, or one MIG instance of it.
type domainKey struct{ uuid, gi string }

// usageKey is one tenant's usage of one share domain.
type usageKey struct {
	domainKey
	tenant string
}

// errStat accumulates absolute errors of a share.
type errStat struct {
	n         int
	sum, max  float64
	meanTruth float64
}

func (e *errStat) add(got, truth float64) {
	d := math.Abs(got - truth)
	e.n++
	e.sum += d
	e.max = max(e.max, d)
	e.meanTruth += truth
}

func (e *errStat) mean() float64 { return e.sum / float64(max(1, e.n)) }

// TestSharesConserveAndTrack runs every built-in scenario for its whole
// duration in virtual time, sampling every truthSample, and checks on every
// sample that the per-tenant splits conserve: the tenants of each GPU (or
// MIG instance), unassigned included, add up to the device's (instance's)
// SM active, DRAM active and context-switch increase. It compares the
// apportioned SM and HBM shares with the simulator's ground truth (the
// tenants' true shares over the same interval) and bounds their mean error;
// with -share-table it prints the error table of docs/share-accuracy.md (run
// without -race: under it the runs are cut short):
//
//	go test ./tenant -run TestSharesConserveAndTrack -share-table
func TestSharesConserveAndTrack(t *testing.T) {
	if testing.Short() {
		t.Skip("full scenario runs")
	}
	list, err := scenarios.List()
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, bi := range list {
		t.Run(bi.Name, func(t *testing.T) {
			rows := checkScenarioShares(t, bi)
			table = append(table, rows...)
		})
	}
	if *shareTable {
		fmt.Println("| scenario | mode | tenant | GPU (instance) | true SM share | SM error mean | SM error worst | true HBM share | HBM error mean | HBM error worst |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range table {
			fmt.Println(r)
		}
	}
}

// checkScenarioShares runs one scenario and returns its rows of the error
// table.
func checkScenarioShares(t *testing.T, bi scenarios.Builtin) []string {
	sc, cfg := loadBuiltin(t, bi)
	h := simtest.Start(t, sc, cfg)
	s, clock, b := h.Sim, h.Clock, h.Builder
	// the tenant each simulated process is attributed to
	owner := map[string]string{}
	pidOf := map[string]uint32{}
	for _, ts := range sc.Tenants {
		owner[ts.Name] = tenant.Unassigned
		if cfg != nil && cfg.TenantByName(ts.Name) != nil {
			owner[ts.Name] = ts.Name
		}
		pidOf[ts.Name] = ts.Process.PID
	}
	ctx := context.Background()
	if _, err := s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	_ = s.Window()
	b.Build(nil, gpu.SamplerStats{}) // nothing yet
	smErr, bwErr := map[usageKey]*errStat{}, map[usageKey]*errStat{}
	mode := map[domainKey]gpu.SharingMode{}
	// where each process ran last: its share domain
	where := map[uint32]domainKey{}
	// last context-switch total of each tenant series
	lastCS := map[usageKey]float64{}
	prevDevCS := map[string]uint64{}
	gpuIdx := map[string]int{}
	run := sc.Duration
	if raceEnabled {
		run = min(run, raceRun)
	}
	steps := int(run / truthSample)
	for step := 1; step <= steps; step++ {
		at := s.Now().Add(truthSample)
		s.AdvanceTo(at)
		clock.Set(at)
		r, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		truth := s.Window() // the same interval as the sample
		snap := b.Build(r, gpu.SamplerStats{})

		sm, dram := map[domainKey]float64{}, map[domainKey]float64{}
		got := map[usageKey]tenant.Usage{}
		csSum := map[string]float64{}
		for _, u := range snap.Usage {
			k := usageKey{domainKey{u.UUID, u.GPUInstance}, u.Tenant}
			got[k] = u
			if u.SMActive != nil {
				sm[k.domainKey] += *u.SMActive
			}
			if u.DRAMActive != nil {
				dram[k.domainKey] += *u.DRAMActive
			}
			if u.ContextSwitchesTotal != nil {
				csSum[u.UUID] += *u.ContextSwitchesTotal - lastCS[k]
				lastCS[k] = *u.ContextSwitchesTotal
			}
		}
		for _, d := range r.Devices {
			if !d.Up {
				continue
			}
			check := func(what string, dk domainKey, want *float64, sums map[domainKey]float64) {
				t.Helper()
				if want == nil {
					return
				}
				if math.Abs(sums[dk]-*want) > conserveTol {
					t.Errorf("%s GPU %d instance %q: tenants' %s add up to %.12f, the domain's is %.12f", at.Format(time.TimeOnly), d.Index, dk.gi, what, sums[dk], *want)
				}
			}
			gpuIdx[d.UUID] = d.Index
			for _, p := range d.Processes {
				gi := ""
				if p.GPUInstanceID >= 0 {
					gi = fmt.Sprint(p.GPUInstanceID)
				}
				where[p.PID] = domainKey{d.UUID, gi}
			}
			if len(d.MIG) > 0 {
				for _, inst := range d.MIG {
					dk := domainKey{d.UUID, fmt.Sprint(inst.GPUInstanceID)}
					mode[dk] = gpu.SharingMIG
					check("SM active", dk, inst.Activity.SMActive, sm)
					check("DRAM active", dk, inst.Activity.DRAMActive, dram)
				}
				continue
			}
			dk := domainKey{d.UUID, ""}
			mode[dk] = d.Mode
			check("SM active", dk, d.Activity.SMActive, sm)
			check("DRAM active", dk, d.Activity.DRAMActive, dram)
			if d.ContextSwitchesTotal != nil {
				if prev, ok := prevDevCS[d.UUID]; ok {
					want := float64(*d.ContextSwitchesTotal - prev)
					if math.Abs(csSum[d.UUID]-want) > 1e-6*max(1, want) {
						t.Errorf("%s GPU %d: tenants' context switches grew by %v, the device's by %v", at.Format(time.TimeOnly), d.Index, csSum[d.UUID], want)
					}
				}
				prevDevCS[d.UUID] = *d.ContextSwitchesTotal
			}
		}

		// ground truth per tenant usage: the true shares of the processes
		// attributed to it
		trueSM, trueBW := map[usageKey]float64{}, map[usageKey]float64{}
		for _, tw := range truth.Tenants {
			dk, ok := where[pidOf[tw.Tenant]]
			if !ok {
				continue // never ran
			}
			k := usageKey{dk, owner[tw.Tenant]}
			trueSM[k] += tw.SMShare
			trueBW[k] += tw.BWShare
		}
		for k, u := range got {
			if u.SMActive != nil {
				stat(smErr, k).add(*u.SMActive, trueSM[k])
			}
			if u.DRAMActive != nil {
				stat(bwErr, k).add(*u.DRAMActive, trueBW[k])
			}
		}
	}
	keys := make([]usageKey, 0, len(smErr))
	for k := range smErr {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, c usageKey) int {
		if d := gpuIdx[a.uuid] - gpuIdx[c.uuid]; d != 0 {
			return d
		}
		return strings.Compare(a.gi+"/"+a.tenant, c.gi+"/"+c.tenant)
	})
	var rows []string
	for _, k := range keys {
		se, be := smErr[k], stat(bwErr, k)
		if !raceEnabled && (se.mean() > smErrMax || be.mean() > hbmErrMax) {
			t.Errorf("tenant %s on %s instance %q: mean error SM %.4f (at most %v), HBM %.4f (at most %v)", k.tenant, k.uuid, k.gi, se.mean(), smErrMax, be.mean(), hbmErrMax)
		}
		where := fmt.Sprint(gpuIdx[k.uuid])
		if k.gi != "" {
			where += " (GI " + k.gi + ")"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %.3f | %.4f | %.4f | %.3f | %.4f | %.4f |",
			bi.Name, mode[k.domainKey], k.tenant, where,
			se.meanTruth/float64(max(1, se.n)), se.mean(), se.max,
			be.meanTruth/float64(max(1, be.n)), be.mean(), be.max))
	}
	return rows
}

func stat(m map[usageKey]*errStat, k usageKey) *errStat {
	e, ok := m[k]
	if !ok {
		e = &errStat{}
		m[k] = e
	}
	return e
}
