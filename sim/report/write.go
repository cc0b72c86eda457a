package report

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Formats of the time series files.
const (
	FormatCSV  = "csv"
	FormatJSON = "json"
)

// File names written by WriteFiles.
const (
	FileSummary     = "summary.txt"
	FileTenantsCSV  = "tenants.csv"
	FileGPUsCSV     = "gpus.csv"
	FileJSON        = "series.json"
	FileLatencyPlot = "latency.png"
	FileSharesPlot  = "shares.png"
	FileGPUPlot     = "gpus.png"
)

// WriteSummaryText writes the summary as aligned tables for a terminal.
func WriteSummaryText(w io.Writer, s Summary) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "scenario %s, policy %s, seed %d: %s simulated in %d steps\n\n",
		s.Meta.Scenario, s.Meta.Policy, s.Meta.Seed, fmtDuration(s.Seconds), s.Steps)
	if len(s.Meta.Settings) > 0 {
		fmt.Fprintf(ew, "settings: %s\n\n", strings.Join(s.Meta.Settings, ", "))
	}

	index := map[string]string{}
	for _, g := range s.GPUs {
		index[g.UUID] = strconv.Itoa(g.Index)
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tGPU\tREQUESTS\tREQ/S\tSLO\tATTAINMENT\tMET\tSLACK\tP50\tP99\tWORK/S\tGOODPUT/S\tSM SHARE\tBW SHARE\tDROPPED\tOVERDUE\tOOMS")
	for _, t := range s.Tenants {
		slo, met, att := "-", "-", fmtAttainment(t.Attainment, t.SLOQuantile)
		if t.NeverServed() {
			att = "no requests"
		}
		if t.SLOTarget > 0 {
			slo = fmt.Sprintf("p%s<=%s", strconv.FormatFloat(t.SLOQuantile*100, 'f', -1, 64), fmtSeconds(&t.SLOTarget))
			if t.SLOMetric != "" {
				slo = t.SLOMetric + " " + slo
			}
		}
		if t.SLOMet != nil {
			met = "no"
			if *t.SLOMet {
				met = "yes"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n",
			t.Tenant, cmp.Or(index[t.GPU], t.GPU), t.Requests, fmtFloat(t.Throughput), slo, att, met,
			fmtTimes(t.Slack), fmtSeconds(t.P50), fmtSeconds(t.P99), fmtFloat(t.WorkRate), fmtFloat(t.Goodput),
			fmtRatio(&t.SMShare), fmtRatio(&t.BWShare), t.Dropped, t.Overdue, t.OOMs)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "GPU\tUUID\tSM ACTIVE\tDRAM ACTIVE\tPOWER\tSM CLOCK")
	for _, g := range s.GPUs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s W\t%s MHz\n", g.Index, g.UUID,
			fmtRatio(&g.SMActive), fmtRatio(&g.DRAMActive), fmtFloat(g.PowerW), fmtFloat(g.SMClockMHz))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(ew, "\nSLOs met: %d of %d tenants with an SLO\n", s.SLOsMet, s.SLOsHeld)
	if s.SLOsHeld == 0 {
		// a share of GPU-minutes would say 0% with no tenant, 100%
		// with tenants and no SLO: neither has one to hold
		fmt.Fprintln(ew, "SLOs held: no tenant has an SLO, so none to hold (goodput is all the work done)")
	} else {
		fmt.Fprintf(ew, "SLOs held in %s of the GPU-minutes (goodput counts work only there)\n", fmtRatio(s.HeldFraction))
	}
	// held is judged per minute, met over the run: a minute with no
	// request to judge holds, a run with none is not met
	var unserved []string
	for _, t := range s.Tenants {
		if t.NeverServed() {
			unserved = append(unserved, t.Tenant)
		}
	}
	if len(unserved) > 0 {
		fmt.Fprintf(ew, "  (a minute with no request holds: %s never served, its SLO not met)\n", strings.Join(unserved, ", "))
	}
	fmt.Fprintf(ew, "energy: %s\n", FormatEnergy(s.EnergyJ))
	return ew.err
}

// tenantHeader is the header of the tenants CSV.
var tenantHeader = []string{"t_seconds", "tenant", "gpu", "completed", "good", "attainment",
	"p50_seconds", "p99_seconds", "slo_quantile", "slo_target_seconds", "throughput_rps",
	"work_per_second", "sm_share", "bw_share", "dropped", "ooms"}

// WriteTenantsCSV writes one row per step and tenant. Figures that do not
// exist for a step (percentiles and attainment without requests) are empty.
func WriteTenantsCSV(w io.Writer, steps []Step) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(tenantHeader); err != nil {
		return err
	}
	for _, st := range steps {
		for _, t := range st.Tenants {
			rec := []string{num(st.T), t.Tenant, t.GPU, strconv.Itoa(t.Completed), strconv.Itoa(t.Good),
				optNum(t.Attainment), optNum(t.P50), optNum(t.P99), num(t.SLOQuantile), num(t.SLOTarget),
				num(t.Throughput), num(t.WorkRate), num(t.SMShare), num(t.BWShare), strconv.Itoa(t.Dropped), strconv.Itoa(t.OOMs)}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteGPUsCSV writes one row per step and GPU.
func WriteGPUsCSV(w io.Writer, steps []Step) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"t_seconds", "gpu", "uuid", "sm_active", "dram_active", "power_watts", "sm_clock_mhz"}); err != nil {
		return err
	}
	for _, st := range steps {
		for _, g := range st.GPUs {
			rec := []string{num(st.T), strconv.Itoa(g.Index), g.UUID, num(g.SMActive), num(g.DRAMActive), num(g.PowerW), num(g.SMClockMHz)}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonRun is the layout of the JSON file.
type jsonRun struct {
	Meta            Meta    `json:"meta"`
	StepSeconds     float64 `json:"step_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
	Summary         Summary `json:"summary"`
	Steps           []Step  `json:"steps"`
}

// WriteJSON writes the run (description, summary and every step) as one
// JSON document.
func WriteJSON(w io.Writer, r *Recorder) error {
	m := r.Meta()
	run := jsonRun{Meta: m, StepSeconds: m.Step.Seconds(), DurationSeconds: m.Duration.Seconds(), Summary: r.Summary(), Steps: r.Steps()}
	if run.Steps == nil {
		run.Steps = []Step{}
	}
	return json.NewEncoder(w).Encode(run)
}

// WriteFiles writes the summary, the time series in format (FormatCSV or
// FormatJSON) and the plots into dir, creating it if needed, and returns
// the paths written.
func WriteFiles(dir string, r *Recorder, format string) ([]string, error) {
	if format != FormatCSV && format != FormatJSON {
		return nil, fmt.Errorf("unknown format %q (want %s or %s)", format, FormatCSV, FormatJSON)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, f func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		if err := writeFile(p, f); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	sum := r.Summary()
	if err := write(FileSummary, func(w io.Writer) error { return WriteSummaryText(w, sum) }); err != nil {
		return written, err
	}
	if format == FormatCSV {
		if err := write(FileTenantsCSV, func(w io.Writer) error { return WriteTenantsCSV(w, r.Steps()) }); err != nil {
			return written, err
		}
		if err := write(FileGPUsCSV, func(w io.Writer) error { return WriteGPUsCSV(w, r.Steps()) }); err != nil {
			return written, err
		}
	} else if err := write(FileJSON, func(w io.Writer) error { return WriteJSON(w, r) }); err != nil {
		return written, err
	}
	plots := []struct {
		name string
		f    func(*Recorder) (Plot, error)
	}{{FileLatencyPlot, LatencyPlot}, {FileSharesPlot, SharesPlot}, {FileGPUPlot, GPUPlot}}
	for _, p := range plots {
		pl, err := p.f(r)
		if errors.Is(err, errNoTenants) {
			continue // a scenario of no tenants: nothing to draw
		}
		if err != nil {
			return written, fmt.Errorf("%s: %w", p.name, err)
		}
		if err := write(p.name, pl.WritePNG); err != nil {
			return written, err
		}
	}
	return written, nil
}

// writeFile writes a file through f and reports the first error of f or
// of closing it.
func writeFile(path string, f func(io.Writer) error) (err error) {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if err := f(out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

var errNoData = errors.New("no steps recorded")

// errNoTenants is the error of a tenant plot of a run with no tenants.
var errNoTenants = errors.New("no tenants")

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func optNum(v *float64) string {
	if v == nil {
		return ""
	}
	return num(*v)
}

// fmtFloat renders v with about three significant digits, with an SI
// prefix from 10^4 on (work rates in FLOP/s are large).
func fmtFloat(v float64) string {
	if v == 0 {
		return "0"
	}
	for _, p := range []struct {
		from, unit float64
		s          string
	}{{1e15, 1e15, "P"}, {1e12, 1e12, "T"}, {1e9, 1e9, "G"}, {1e6, 1e6, "M"}, {1e4, 1e3, "k"}} {
		if math.Abs(v) >= p.from {
			return sig3(v/p.unit) + p.s
		}
	}
	return sig3(v)
}

// FormatEnergy renders joules as kilojoules with about three significant
// digits and no exponent or SI prefix: "221 kJ", "2.4 kJ".
func FormatEnergy(j float64) string {
	kj, _ := strconv.ParseFloat(strconv.FormatFloat(j/1000, 'g', 3, 64), 64)
	if math.Abs(kj) >= 100 {
		return strconv.FormatFloat(kj, 'f', 0, 64) + " kJ"
	}
	return strconv.FormatFloat(kj, 'f', -1, 64) + " kJ"
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v*100, 'f', 1, 64) + "%"
}

// fmtAttainment renders an attainment of an SLO at quantile q as a
// percentage rounded down (FloorPercentFor).
func fmtAttainment(v *float64, q float64) string {
	if v == nil {
		return "-"
	}
	return FloorPercentFor(*v, q)
}

// fmtTimes renders a ratio as a multiple ("2.5x").
func fmtTimes(v *float64) string {
	if v == nil {
		return "-"
	}
	return sig3(*v) + "x"
}

// fmtSeconds renders seconds with three significant digits in ms or s.
func fmtSeconds(v *float64) string {
	if v == nil {
		return "-"
	}
	if *v < 1 {
		return sig3(*v*1000) + "ms"
	}
	return sig3(*v) + "s"
}

// sig3 renders v with about three significant digits and no exponent.
func sig3(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || a == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func fmtDuration(secs float64) string {
	return time.Duration(secs * float64(time.Second)).Round(time.Millisecond).String()
}
