// Command compare checks a vgpu_exporter /metrics page against nvidia-smi's
// XML report (`nvidia-smi -q -x`) taken at about the same time on the same
// host: GPU count, UUIDs, memory size, SM clock, GPU utilization, power
// draw and limit, temperature, MIG and persistence mode, each within a stated
// tolerance. It prints a table and PASS or FAIL, and exits
// 0 on PASS, 1 on FAIL and 2 when an input cannot be read.
//
//	compare --metrics metrics.txt --smi nvidia-smi.xml
package main

import (
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Tolerances of the checks.
type Tolerances struct {
	// MemoryMiB is the allowed difference of the memory size. nvidia-smi
	// prints MiB, so the exporter's bytes are compared after rounding.
	MemoryMiB float64
	// SMClockRel is the allowed relative difference of the SM clock: the
	// two reads are up to a second apart and the clock moves under load.
	SMClockRel float64
	// UtilAbs is the allowed absolute difference of the utilization ratio
	// (0-1): both are averages over slightly different windows.
	UtilAbs float64
	// PowerRel and PowerAbsW bound the power draw difference (the larger
	// of the two applies): the draw moves under load between the reads.
	PowerRel  float64
	PowerAbsW float64
	// PowerLimitW is the allowed difference of the power limit, a setting.
	PowerLimitW float64
	// TemperatureC is the allowed temperature difference in °C.
	TemperatureC float64
}

// DefaultTolerances are used unless flags say otherwise.
var DefaultTolerances = Tolerances{MemoryMiB: 1, SMClockRel: 0.15, UtilAbs: 0.25,
	PowerRel: 0.25, PowerAbsW: 30, PowerLimitW: 1, TemperatureC: 5}

// SMIGPU is what the comparison reads of one GPU in nvidia-smi's report.
type SMIGPU struct {
	PCIBusID   string `xml:"id,attr"`
	Name       string `xml:"product_name"`
	UUID       string `xml:"uuid"`
	MemTotal   string `xml:"fb_memory_usage>total"`
	MemUsed    string `xml:"fb_memory_usage>used"`
	GPUUtil    string `xml:"utilization>gpu_util"`
	SMClock    string `xml:"clocks>sm_clock"`
	CurrentMIG string `xml:"mig_mode>current_mig"`
	// Persistence is "Enabled" or "Disabled".
	Persistence string `xml:"persistence_mode"`
	Temperature string `xml:"temperature>gpu_temp"`
	// Power: R535 and later report under gpu_power_readings (the draw
	// also as average_ and instant_power_draw in newer drivers), older
	// drivers under power_readings.
	PowerDraw        string `xml:"gpu_power_readings>power_draw"`
	PowerDrawAverage string `xml:"gpu_power_readings>average_power_draw"`
	PowerLimit       string `xml:"gpu_power_readings>current_power_limit"`
	OldPowerDraw     string `xml:"power_readings>power_draw"`
	OldPowerLimit    string `xml:"power_readings>enforced_power_limit"`
}

// power returns the power draw and limit texts of whichever layout the
// report has.
func (g SMIGPU) power() (draw, limit string) {
	draw, limit = g.PowerDraw, g.PowerLimit
	if _, ok := smiNumber(draw); !ok && g.PowerDrawAverage != "" {
		draw = g.PowerDrawAverage
	}
	if draw == "" {
		draw = g.OldPowerDraw
	}
	if limit == "" {
		limit = g.OldPowerLimit
	}
	return draw, limit
}

// SMIReport is nvidia-smi's XML report.
type SMIReport struct {
	XMLName       xml.Name `xml:"nvidia_smi_log"`
	DriverVersion string   `xml:"driver_version"`
	AttachedGPUs  int      `xml:"attached_gpus"`
	GPUs          []SMIGPU `xml:"gpu"`
}

// ParseSMI reads `nvidia-smi -q -x` output.
func ParseSMI(r io.Reader) (*SMIReport, error) {
	var rep SMIReport
	dec := xml.NewDecoder(r)
	// nvidia-smi's DOCTYPE names a DTD file; nothing else to resolve.
	dec.Strict = true
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("nvidia-smi XML: %w", err)
	}
	if len(rep.GPUs) == 0 {
		return nil, fmt.Errorf("nvidia-smi XML: no <gpu> element")
	}
	return &rep, nil
}

// smiNumber parses "81559 MiB", "1980 MHz", "97 %"; ok is false for "N/A".
func smiNumber(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// ExporterGPU is what the comparison reads of one GPU in the exporter's page.
type ExporterGPU struct {
	Index                                   string
	UUID                                    string
	Name                                    string
	Mode                                    string // vgpu_gpu_info's mode label
	MemTotal, MemUsed, SMClock, Utilization *float64
	Power, PowerLimit, Temperature          *float64
	Persistence                             *float64 // 0/1
}

// ParseMetrics reads the exporter's /metrics page: vgpu_gpu_info and the
// per-GPU gauges, keyed by the uuid label.
func ParseMetrics(r io.Reader) (map[string]*ExporterGPU, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := map[string]*ExporterGPU{}
	get := func(m *dto.Metric) *ExporterGPU {
		var uuid, idx, name, mode string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "uuid":
				uuid = l.GetValue()
			case "gpu":
				idx = l.GetValue()
			case "name":
				name = l.GetValue()
			case "mode":
				mode = l.GetValue()
			}
		}
		if uuid == "" {
			return nil
		}
		g := out[uuid]
		if g == nil {
			g = &ExporterGPU{UUID: uuid}
			out[uuid] = g
		}
		if idx != "" {
			g.Index = idx
		}
		if name != "" {
			g.Name = name
		}
		if mode != "" {
			g.Mode = mode
		}
		return g
	}
	info, ok := mfs["vgpu_gpu_info"]
	if !ok {
		return nil, fmt.Errorf("metrics: no vgpu_gpu_info series (is this a vgpu_exporter page?)")
	}
	for _, m := range info.GetMetric() {
		get(m)
	}
	for name, set := range map[string]func(g *ExporterGPU, v float64){
		"vgpu_gpu_memory_total_bytes":  func(g *ExporterGPU, v float64) { g.MemTotal = &v },
		"vgpu_gpu_memory_used_bytes":   func(g *ExporterGPU, v float64) { g.MemUsed = &v },
		"vgpu_gpu_sm_clock_hertz":      func(g *ExporterGPU, v float64) { g.SMClock = &v },
		"vgpu_gpu_utilization_ratio":   func(g *ExporterGPU, v float64) { g.Utilization = &v },
		"vgpu_gpu_power_watts":         func(g *ExporterGPU, v float64) { g.Power = &v },
		"vgpu_gpu_power_limit_watts":   func(g *ExporterGPU, v float64) { g.PowerLimit = &v },
		"vgpu_gpu_temperature_celsius": func(g *ExporterGPU, v float64) { g.Temperature = &v },
		"vgpu_gpu_persistence_mode":    func(g *ExporterGPU, v float64) { g.Persistence = &v },
	} {
		for _, m := range mfs[name].GetMetric() {
			g := get(m)
			if g == nil {
				continue
			}
			switch {
			case m.Gauge != nil:
				set(g, m.Gauge.GetValue())
			case m.Untyped != nil:
				set(g, m.Untyped.GetValue())
			}
		}
	}
	return out, nil
}

// Row is one line of the result table.
type Row struct {
	GPU, Check, SMI, Exporter, Tolerance string
	Pass                                 bool
}

// Compare checks the exporter's GPUs against nvidia-smi's.
func Compare(smi *SMIReport, exp map[string]*ExporterGPU, tol Tolerances) []Row {
	var rows []Row
	rows = append(rows, Row{GPU: "all", Check: "GPU count",
		SMI: strconv.Itoa(len(smi.GPUs)), Exporter: strconv.Itoa(len(exp)), Tolerance: "exact",
		Pass: len(smi.GPUs) == len(exp)})
	seen := map[string]bool{}
	for _, s := range smi.GPUs {
		uuid := strings.TrimSpace(s.UUID)
		seen[uuid] = true
		label := shortUUID(uuid)
		g := exp[uuid]
		rows = append(rows, Row{GPU: label, Check: "UUID present", SMI: uuid, Exporter: yesNo(g != nil),
			Tolerance: "exact", Pass: g != nil})
		if g == nil {
			continue
		}
		// Memory size.
		if want, ok := smiNumber(s.MemTotal); ok {
			row := Row{GPU: label, Check: "memory total (MiB)", SMI: fmt.Sprintf("%.0f", want),
				Tolerance: fmt.Sprintf("±%.0f MiB", tol.MemoryMiB)}
			if g.MemTotal != nil {
				got := *g.MemTotal / (1 << 20)
				row.Exporter = fmt.Sprintf("%.0f", got)
				row.Pass = math.Abs(math.Round(got)-want) <= tol.MemoryMiB
			} else {
				row.Exporter = "missing"
			}
			rows = append(rows, row)
		}
		// SM clock.
		if want, ok := smiNumber(s.SMClock); ok {
			row := Row{GPU: label, Check: "SM clock (MHz)", SMI: fmt.Sprintf("%.0f", want),
				Tolerance: fmt.Sprintf("±%.0f%%", tol.SMClockRel*100)}
			if g.SMClock != nil {
				got := *g.SMClock / 1e6
				row.Exporter = fmt.Sprintf("%.0f", got)
				row.Pass = math.Abs(got-want) <= tol.SMClockRel*math.Max(want, 1)
			} else {
				row.Exporter = "missing"
			}
			rows = append(rows, row)
		}
		// Utilization; nvidia-smi prints N/A in MIG mode and the exporter
		// then leaves the series out: both absent passes.
		rows = append(rows, numericRow(label, "utilization", s.GPUUtil, g.Utilization, 0.01,
			fmt.Sprintf("±%.2f", tol.UtilAbs), "%.2f",
			func(got, want float64) bool { return math.Abs(got-want) <= tol.UtilAbs }))
		draw, limit := s.power()
		rows = append(rows, numericRow(label, "power draw (W)", draw, g.Power, 1,
			fmt.Sprintf("±%.0f%% or ±%.0f W", tol.PowerRel*100, tol.PowerAbsW), "%.1f",
			func(got, want float64) bool {
				return math.Abs(got-want) <= math.Max(tol.PowerRel*want, tol.PowerAbsW)
			}))
		rows = append(rows, numericRow(label, "power limit (W)", limit, g.PowerLimit, 1,
			fmt.Sprintf("±%.0f W", tol.PowerLimitW), "%.1f",
			func(got, want float64) bool { return math.Abs(got-want) <= tol.PowerLimitW }))
		rows = append(rows, numericRow(label, "temperature (°C)", s.Temperature, g.Temperature, 1,
			fmt.Sprintf("±%.0f °C", tol.TemperatureC), "%.0f",
			func(got, want float64) bool { return math.Abs(got-want) <= tol.TemperatureC }))
		// Modes: exact.
		if mig := strings.TrimSpace(s.CurrentMIG); mig == "Enabled" || mig == "Disabled" {
			got := g.Mode == "mig"
			rows = append(rows, Row{GPU: label, Check: "MIG mode", SMI: mig, Exporter: "mode=" + g.Mode,
				Tolerance: "exact", Pass: got == (mig == "Enabled")})
		}
		if pm := strings.TrimSpace(s.Persistence); pm == "Enabled" || pm == "Disabled" {
			row := Row{GPU: label, Check: "persistence mode", SMI: pm, Exporter: "missing", Tolerance: "exact"}
			if g.Persistence != nil {
				row.Exporter = fmt.Sprintf("%.0f", *g.Persistence)
				row.Pass = (*g.Persistence == 1) == (pm == "Enabled")
			}
			rows = append(rows, row)
		}
		// Memory used is informational: the load changes it between reads.
		if used, ok := smiNumber(s.MemUsed); ok && g.MemUsed != nil {
			rows = append(rows, Row{GPU: label, Check: "memory used (MiB, info)", SMI: fmt.Sprintf("%.0f", used),
				Exporter: fmt.Sprintf("%.0f", *g.MemUsed/(1<<20)), Tolerance: "not checked", Pass: true})
		}
	}
	var extra []string
	for uuid := range exp {
		if !seen[uuid] {
			extra = append(extra, uuid)
		}
	}
	sort.Strings(extra)
	for _, uuid := range extra {
		rows = append(rows, Row{GPU: shortUUID(uuid), Check: "UUID known to nvidia-smi", SMI: "no", Exporter: uuid,
			Tolerance: "exact", Pass: false})
	}
	return rows
}

// numericRow compares a figure nvidia-smi prints (smiText, "N/A" when it
// has none) with the exporter's (got, nil when the series is absent);
// scale converts nvidia-smi's unit into the exporter's. Absent on both sides
// passes; absent on one side fails.
func numericRow(gpu, check, smiText string, got *float64, scale float64, tol, format string,
	within func(got, want float64) bool) Row {
	row := Row{GPU: gpu, Check: check, Tolerance: tol, SMI: "N/A", Exporter: "absent"}
	want, ok := smiNumber(smiText)
	if ok {
		want *= scale
		row.SMI = fmt.Sprintf(format, want)
	}
	if got != nil {
		row.Exporter = fmt.Sprintf(format, *got)
	}
	switch {
	case ok && got != nil:
		row.Pass = within(*got, want)
	case !ok && got == nil:
		row.Pass = true
	case ok:
		row.Exporter = "missing"
	}
	return row
}

func shortUUID(u string) string {
	if len(u) > 12 {
		return u[:12]
	}
	return u
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Print writes the table and the verdict; it returns whether all rows pass.
func Print(w io.Writer, rows []Row) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tCHECK\tNVIDIA-SMI\tEXPORTER\tTOLERANCE\tRESULT")
	all := true
	for _, r := range rows {
		res := "ok"
		if !r.Pass {
			res = "FAIL"
			all = false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.GPU, r.Check, r.SMI, r.Exporter, r.Tolerance, res)
	}
	tw.Flush()
	if all {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
	return all
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	metrics := fs.String("metrics", "", "the exporter's /metrics page, saved to a file")
	smiPath := fs.String("smi", "", "`nvidia-smi -q -x` output, saved to a file")
	tol := DefaultTolerances
	fs.Float64Var(&tol.MemoryMiB, "tol.memory-mib", tol.MemoryMiB, "allowed memory size difference in MiB")
	fs.Float64Var(&tol.SMClockRel, "tol.sm-clock", tol.SMClockRel, "allowed relative SM clock difference")
	fs.Float64Var(&tol.UtilAbs, "tol.utilization", tol.UtilAbs, "allowed absolute utilization difference (0-1)")
	fs.Float64Var(&tol.PowerRel, "tol.power", tol.PowerRel, "allowed relative power draw difference")
	fs.Float64Var(&tol.PowerAbsW, "tol.power-watts", tol.PowerAbsW, "allowed absolute power draw difference in W (the larger applies)")
	fs.Float64Var(&tol.PowerLimitW, "tol.power-limit-watts", tol.PowerLimitW, "allowed power limit difference in W")
	fs.Float64Var(&tol.TemperatureC, "tol.temperature", tol.TemperatureC, "allowed temperature difference in °C")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *metrics == "" || *smiPath == "" {
		fmt.Fprintln(stderr, "compare: --metrics and --smi are required")
		return 2
	}
	mf, err := os.Open(*metrics)
	if err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 2
	}
	defer mf.Close()
	exp, err := ParseMetrics(mf)
	if err != nil {
		fmt.Fprintf(stderr, "compare: %s: %v\n", *metrics, err)
		return 2
	}
	sf, err := os.Open(*smiPath)
	if err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 2
	}
	defer sf.Close()
	smi, err := ParseSMI(sf)
	if err != nil {
		fmt.Fprintf(stderr, "compare: %s: %v\n", *smiPath, err)
		return 2
	}
	fmt.Fprintf(stdout, "nvidia-smi driver %s, %d GPUs; exporter %d GPUs\n", smi.DriverVersion, len(smi.GPUs), len(exp))
	if Print(stdout, Compare(smi, exp, tol)) {
		return 0
	}
	return 1
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
