package collector

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
)

// simHost runs a built-in scenario for a few tuner rounds (recommend mode,
// the simulator's actuators) and returns its last snapshot and the tuner's
// status as the exporter serves it: a runner's, with the interval it runs
// the rounds at.
func simHost(t *testing.T, scenario string) (*tenant.Snapshot, func() *tuner.Status) {
	t.Helper()
	h := simtest.New(t, "../scenarios/"+scenario+".yaml", "../scenarios/"+scenario+".tenants.yaml")
	tu, err := tuner.New(tuner.DefaultOptions(tuner.Options{
		Policy: autotune.New(), Rebalance: rebalance.Default(), Actuators: tuner.ActuatorsOf(h.Sim), Clock: h.Clock, Mode: tuner.ModeRecommend,
		Actuated: tuner.DescribeActuators([]tuner.NamedActuator{{Name: "sim", Impl: h.Sim}}),
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	const interval = 15 * time.Second
	ctx := context.Background()
	var snap *tenant.Snapshot
	for i := range 8 {
		r := h.Sample(ctx, interval)
		h.Builder.Refresh(ctx)
		snap = h.Builder.Build(r, gpu.SamplerStats{SamplesTotal: uint64(i + 1), LastSuccess: h.Clock.Now(), Interval: interval})
		if _, err := tu.RunOnce(ctx, snap); err != nil {
			t.Fatal(err)
		}
	}
	return snap, tuner.NewRunner(tu, nil, h.Clock, interval, func() *tenant.Snapshot { return snap }, nil).Status
}

// cardinalityTerms count, for each "Each" of the cardinality table in
// docs/metrics.md, how many a host has.
var cardinalityTerms = map[string]func(*tenant.Snapshot, *tuner.Status) int{
	"GPU": func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.Readings.Devices) },
	"GPU in MIG mode or on a vGPU host": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.Readings.Devices, func(d gpu.Device) bool { return d.MIGEnabled || d.Scheduler != nil })
	},
	"GPU in MPS mode": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.Readings.Devices, func(d gpu.Device) bool { return d.Up && d.Mode == gpu.SharingMPS })
	},
	"GPU with NVLink and row remapping": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.Readings.Devices, func(d gpu.Device) bool {
			return d.Up && d.Health.NVLinkActive != nil && d.Health.RowRemapPending != nil
		})
	},
	"MIG instance": func(s *tenant.Snapshot, _ *tuner.Status) int {
		n := 0
		for _, d := range s.Readings.Devices {
			n += len(d.MIG)
		}
		return n
	},
	"vGPU instance": func(s *tenant.Snapshot, _ *tuner.Status) int {
		n := 0
		for _, d := range s.Readings.Devices {
			n += len(d.VGPUs)
		}
		return n
	},
	"vGPU host GPU": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.Readings.Devices, func(d gpu.Device) bool { return d.Scheduler != nil })
	},
	"vGPU scheduler runlist": func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.VGPURunlists) },
	"tenant usage":           func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.Usage) },
	"tenant usage inside a MIG instance": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.Usage, func(u tenant.Usage) bool { return u.GPUInstance != "" })
	},
	"tenant metered on a GPU": func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.Meters) },
	"GPU metered":             func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.GPUMeters) },
	"cost component of a tenant metered on a GPU": func(s *tenant.Snapshot, _ *tuner.Status) int {
		energy := map[string]bool{}
		for _, g := range s.GPUMeters {
			energy[g.UUID] = g.EnergyKnown
		}
		n := 0
		for _, m := range s.Meters {
			n += costComponents(m.Costs, energy[m.UUID])
		}
		return n
	},
	"cost component of a GPU metered": func(s *tenant.Snapshot, _ *tuner.Status) int {
		n := 0
		for _, g := range s.GPUMeters {
			n += costComponents(g.IdleCosts, g.EnergyKnown)
		}
		return n
	},
	"tenant": func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.Tenants) },
	"container GPU allocation in the pod info": func(s *tenant.Snapshot, _ *tuner.Status) int {
		if s.PodInfo == nil {
			return 0
		}
		return len(s.PodInfo.Allocations)
	},
	"host with the pod info on": func(s *tenant.Snapshot, _ *tuner.Status) int { return map[bool]int{true: 1}[s.PodInfo != nil] },
	"tenant with an SLO": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.SLOs, func(l tenant.SLOStatus) bool { return l.TargetSeconds > 0 })
	},
	"tenant whose SLO quantile is not 0.5, 0.9 or 0.99": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.SLOs, func(l tenant.SLOStatus) bool {
			return l.TargetSeconds > 0 && !slices.Contains(latency.ReportedQuantiles, l.Quantile)
		})
	},
	"tenant with a latency source and no SLO": func(s *tenant.Snapshot, _ *tuner.Status) int {
		return countOf(s.SLOs, func(l tenant.SLOStatus) bool { return l.TargetSeconds <= 0 })
	},
	"share domain with a share.min":   func(s *tenant.Snapshot, _ *tuner.Status) int { return len(s.Attribution.ShareMinSums) },
	"host":                            func(*tenant.Snapshot, *tuner.Status) int { return 1 },
	"host with the tuner on":          func(*tenant.Snapshot, *tuner.Status) int { return 1 },
	"GPU in the tuner's latest round": func(_ *tenant.Snapshot, st *tuner.Status) int { return len(st.GPUs) },
	"knob with an actuator":           func(_ *tenant.Snapshot, st *tuner.Status) int { return len(st.Actuators) },
	"tenant with an MPS decision on a GPU": func(_ *tenant.Snapshot, st *tuner.Status) int {
		seen := map[[2]string]bool{}
		for _, set := range st.Settings {
			if _, ok := set.Target.(tuner.Fraction); ok {
				seen[[2]string{set.GPU, set.Tenant}] = true
			}
		}
		return len(seen)
	},
	"tenant with a pause decision on a GPU": func(_ *tenant.Snapshot, st *tuner.Status) int {
		return countOf(st.Settings, func(set tuner.Setting) bool { _, ok := set.Target.(tuner.Duty); return ok })
	},
	"pause decision whose value in effect is reported": func(_ *tenant.Snapshot, st *tuner.Status) int {
		return countOf(st.Settings, func(set tuner.Setting) bool { _, ok := set.Effective.(tuner.Duty); return ok })
	},
	"tenant paused since start and not gone since, or whose pause failed to freeze": func(_ *tenant.Snapshot, st *tuner.Status) int { return len(st.PauseFreezeFailures) },
	"GPU-level tuner target decided": func(_ *tenant.Snapshot, st *tuner.Status) int {
		return countOf(st.Settings, func(set tuner.Setting) bool {
			switch set.Target.(type) {
			case tuner.Fraction, tuner.Duty:
				return false
			}
			return true
		})
	},
}

// costComponents counts the cost series of one tenant or GPU.
func costComponents(costs []tenant.Cost, energyKnown bool) int {
	return countOf(costs, func(c tenant.Cost) bool { return c.GPUTimePriced }) +
		countOf(costs, func(c tenant.Cost) bool { return c.EnergyPriced && energyKnown })
}

func countOf[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}

// docSection returns the lines of docs/metrics.md under the heading.
func docSection(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## "+heading
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/metrics.md has no section %q", heading)
	}
	return out
}

func tableCells(line string) []string {
	cells := strings.Split(strings.Trim(line, "|"), "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

type cardinalityTerm struct {
	series int
	each   string
}

// cardinalityTable reads the table of docs/metrics.md's Cardinality: rows
// whose first cell is a number of series.
func cardinalityTable(t *testing.T) []cardinalityTerm {
	t.Helper()
	var out []cardinalityTerm
	for _, line := range docSection(t, "Cardinality") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		c := tableCells(line)
		n, err := strconv.Atoi(c[0])
		if err != nil || len(c) != 3 {
			continue
		}
		if cardinalityTerms[c[1]] == nil {
			t.Errorf("docs/metrics.md: cardinality term %q is not one the test counts", c[1])
		}
		out = append(out, cardinalityTerm{n, c[1]})
	}
	for each := range cardinalityTerms {
		if !slices.ContainsFunc(out, func(c cardinalityTerm) bool { return c.each == each }) {
			t.Errorf("docs/metrics.md: the cardinality table has no term %q", each)
		}
	}
	return out
}

// fleetRow is the series per host the Fleet scale table gives a scenario;
// fleetProse the raw series of the fleet of eight-GPU hosts its text adds up.
var (
	fleetRow   = regexp.MustCompile("\\(`([a-z0-9-]+)`\\)")
	fleetProse = regexp.MustCompile(`never the ([0-9.]+)\s+million raw series`)
)

// TestCardinalityDoc serves built-in scenarios (the exporter's collectors,
// the tuner's and the build info, as a scrape has them) and checks that
// the terms of docs/metrics.md's cardinality table add up to what is
// served, and that the Fleet scale table gives the served figures, 10,000
// hosts of them, and its text the eight-GPU hosts' figure.
func TestCardinalityDoc(t *testing.T) {
	terms := cardinalityTable(t)
	fleet := map[string][2]int{} // scenario: with and without the tuner
	section := docSection(t, "Fleet scale")
	eightGPUs := ""
	for _, line := range section {
		m := fleetRow.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(line, "|") {
			continue
		}
		c := tableCells(line)
		with, err1 := strconv.Atoi(c[3])
		without, err2 := strconv.Atoi(c[4])
		if err1 != nil || err2 != nil {
			t.Fatalf("docs/metrics.md: fleet row %q: series per host not numbers", line)
		}
		fleet[m[1]] = [2]int{with, without}
		if want := fmt.Sprintf("%.1f M", float64(with)*10000/1e6); c[5] != want {
			t.Errorf("docs/metrics.md fleet scale: %s on 10,000 hosts is %q, want %q", m[1], c[5], want)
		}
		if c[1] == "8" {
			eightGPUs = c[5]
		}
	}
	if len(fleet) == 0 {
		t.Fatal("docs/metrics.md: no fleet rows naming a scenario")
	}
	switch p := fleetProse.FindStringSubmatch(strings.Join(section, "\n")); {
	case p == nil:
		t.Error("docs/metrics.md fleet scale: the text names no raw series of the fleet (never the N million raw series)")
	case p[1]+" M" != eightGPUs:
		t.Errorf("docs/metrics.md fleet scale: the text's 10,000 eight-GPU hosts serve %s million raw series, the table's %s", p[1], eightGPUs)
	}
	scenarios := []string{"h100-timeslice", "noisy-neighbour", "h200-mig", "vgpu-scheduler", "eight-gpu-hot"}
	for name := range fleet {
		if !slices.Contains(scenarios, name) {
			scenarios = append(scenarios, name)
		}
	}
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			snap, status := simHost(t, sc)
			st := status()
			count := func(g map[string]int) (n, tunerN int) {
				for name, v := range g {
					n += v
					if strings.HasPrefix(name, "vgpu_tuner_") {
						tunerN += v
					}
				}
				return n, tunerN
			}
			served := map[string]int{}
			for name, mf := range testutil.Gather(t, newExporter(t, snap, builtin...), NewTunerCollector(status), versioncollector.NewCollector("vgpu_exporter")) {
				served[name] = len(mf.GetMetric())
			}
			got, gotTuner := count(served)
			want := 0
			var sum []string
			for _, term := range terms {
				n := cardinalityTerms[term.each](snap, st)
				want += term.series * n
				if n > 0 {
					sum = append(sum, fmt.Sprintf("%d x %d %s", term.series, n, term.each))
				}
			}
			if got != want {
				t.Errorf("served %d series, docs/metrics.md's terms give %d:\n  %s", got, want, strings.Join(sum, "\n  "))
			}
			if f, ok := fleet[sc]; ok && (f[0] != got || f[1] != got-gotTuner) {
				t.Errorf("docs/metrics.md fleet scale: %d series, %d without the tuner; served %d and %d", f[0], f[1], got, got-gotTuner)
			}
		})
	}
}
