package table

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// stat is a figure's mean and sample standard deviation over seeds.
type stat struct{ vals []float64 }

func (s *stat) add(v float64) { s.vals = append(s.vals, v) }

func (s stat) String() string { return s.format(false) }

// attainment is s, a percentage attained, with its mean rounded down to
// a tenth: rounded to the nearest, a mean short of a quantile (98.96 of
// 99) would print as reaching it.
type attainment struct{ stat }

func (a attainment) String() string { return a.format(true) }

// format is s's mean ± its standard deviation, the mean rounded down to a
// tenth where floor is true and to 3 significant digits otherwise.
func (s stat) format(floor bool) string {
	if len(s.vals) == 0 {
		return "-"
	}
	var sum float64
	for _, v := range s.vals {
		sum += v
	}
	mean := sum / float64(len(s.vals))
	var ss float64
	for _, v := range s.vals {
		ss += (v - mean) * (v - mean)
	}
	sd := 0.0
	if len(s.vals) > 1 {
		sd = math.Sqrt(ss / float64(len(s.vals)-1))
	}
	m := strconv.FormatFloat(mean, 'g', 3, 64)
	if floor {
		// (the ten-millionth of a tenth keeps a mean on a tenth from falling below it)
		m = strconv.FormatFloat(math.Floor(mean*10+1e-7)/10, 'f', 1, 64)
	}
	return fmt.Sprintf("%s ± %s", m, strconv.FormatFloat(sd, 'g', 3, 64))
}

// WriteSeedStats writes, for runs of one scenario under policy on several
// seeds, the mean ± standard deviation of every tenant's figures and of
// the host's. A tenant with an SLO counts 0 in its attainment on a seed on
// which it never served (no request ended).
func WriteSeedStats(w io.Writer, policy string, sums []report.Summary, rates []simrun.ChangeRate) error {
	type acc struct {
		att                         attainment
		slack, p99, rps, work, good stat
		met, held                   int
	}
	var order []string
	by := map[string]*acc{}
	var met, energy, held stat
	for _, s := range sums {
		met.add(float64(s.SLOsMet))
		energy.add(s.EnergyJ / 1000) // kJ, as the tables and the run's summary say
		if s.HeldFraction != nil {   // (none with no tenant: nothing to hold)
			held.add(*s.HeldFraction * 100)
		}
		for _, t := range s.Tenants {
			a := by[t.Tenant]
			if a == nil {
				a = &acc{}
				by[t.Tenant] = a
				order = append(order, t.Tenant)
			}
			switch {
			case t.Attainment != nil:
				a.att.add(*t.Attainment * 100)
			case t.NeverServed():
				a.att.add(0) // its SLO missed
			}
			if t.Slack != nil {
				a.slack.add(*t.Slack)
			}
			if t.P99 != nil {
				a.p99.add(*t.P99)
			}
			a.rps.add(t.Throughput)
			a.work.add(t.WorkRate)
			a.good.add(t.Goodput)
			if t.SLOMet != nil {
				a.held++
				if *t.SLOMet {
					a.met++
				}
			}
		}
	}
	fmt.Fprintf(w, "\nscenario %s, policy %s, %d seeds: mean ± standard deviation\n\n", sums[0].Meta.Scenario, policy, len(sums))
	if set := sums[0].Meta.Settings; len(set) > 0 {
		fmt.Fprintf(w, "settings: %s\n\n", strings.Join(set, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tATTAINMENT %\tSLO MET\tSLACK\tP99 (s)\tREQ/S\tWORK/S\tGOODPUT/S")
	for _, name := range order {
		a := by[name]
		metCol := "-"
		if a.held > 0 {
			metCol = fmt.Sprintf("%d of %d", a.met, a.held)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, a.att, metCol, a.slack, a.p99, a.rps, a.work, a.good)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var mean, most stat
	for _, r := range rates {
		mean.add(r.Mean)
		most.add(r.Max)
	}
	slos := fmt.Sprintf("SLOs met: %s; SLOs held in %s %% of the GPU-minutes", met, held)
	if !slices.ContainsFunc(sums, func(s report.Summary) bool { return s.SLOsHeld > 0 }) {
		slos = "SLOs: no tenant has one, none to meet or hold"
	}
	_, err := fmt.Fprintf(w, "\n%s; energy: %s kJ\nchanges applied per minute per GPU: %s (busiest GPU: %s)\n", slos, energy, mean, most)
	return err
}
