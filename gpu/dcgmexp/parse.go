package dcgmexp

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Key identifies what a dcgm-exporter series describes: a whole GPU (GI -1)
// or one MIG GPU instance of it.
type Key struct {
	UUID string // the physical GPU's UUID (dcgm-exporter's "UUID" label)
	GI   int    // GPU_I_ID, -1 for the whole GPU
}

// Values are the DCGM fields read for one Key; nil when absent.
type Values struct {
	// Profiling ratios (0-1).
	SMActive     *float64 // DCGM_FI_PROF_SM_ACTIVE
	SMOccupancy  *float64 // DCGM_FI_PROF_SM_OCCUPANCY
	DRAMActive   *float64 // DCGM_FI_PROF_DRAM_ACTIVE
	TensorActive *float64 // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
	// GREngineActive is the fraction of time the graphics/compute engine
	// was busy (DCGM_FI_PROF_GR_ENGINE_ACTIVE): the stand-in for SMActive
	// where a counters file lacks DCGM_FI_PROF_SM_ACTIVE. It is at least
	// SM activity: an engine running a kernel on a few SMs counts as busy.
	GREngineActive *float64

	GPUUtil      *float64 // DCGM_FI_DEV_GPU_UTIL, as a 0-1 ratio
	MemCopyUtil  *float64 // DCGM_FI_DEV_MEM_COPY_UTIL, as a 0-1 ratio
	SMClockHz    *float64 // DCGM_FI_DEV_SM_CLOCK (MHz in the exposition)
	MemClockHz   *float64 // DCGM_FI_DEV_MEM_CLOCK (MHz)
	PowerWatts   *float64 // DCGM_FI_DEV_POWER_USAGE
	TemperatureC *float64 // DCGM_FI_DEV_GPU_TEMP
	EnergyJoules *float64 // DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)
	FBUsedBytes  *float64 // DCGM_FI_DEV_FB_USED (MiB)
	FBFreeBytes  *float64 // DCGM_FI_DEV_FB_FREE (MiB)
}

// Fields are the parsed DCGM fields by GPU and MIG instance.
type Fields map[Key]*Values

// field says how one DCGM metric maps onto Values.
type field struct {
	set   func(v *Values) **float64
	scale float64
	ratio bool // clamp to 0-1
}

var fields = map[string]field{
	"DCGM_FI_PROF_SM_ACTIVE":               {func(v *Values) **float64 { return &v.SMActive }, 1, true},
	"DCGM_FI_PROF_SM_OCCUPANCY":            {func(v *Values) **float64 { return &v.SMOccupancy }, 1, true},
	"DCGM_FI_PROF_DRAM_ACTIVE":             {func(v *Values) **float64 { return &v.DRAMActive }, 1, true},
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":      {func(v *Values) **float64 { return &v.TensorActive }, 1, true},
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE":        {func(v *Values) **float64 { return &v.GREngineActive }, 1, true},
	"DCGM_FI_DEV_GPU_UTIL":                 {func(v *Values) **float64 { return &v.GPUUtil }, 0.01, true},
	"DCGM_FI_DEV_MEM_COPY_UTIL":            {func(v *Values) **float64 { return &v.MemCopyUtil }, 0.01, true},
	"DCGM_FI_DEV_SM_CLOCK":                 {func(v *Values) **float64 { return &v.SMClockHz }, 1e6, false},
	"DCGM_FI_DEV_MEM_CLOCK":                {func(v *Values) **float64 { return &v.MemClockHz }, 1e6, false},
	"DCGM_FI_DEV_POWER_USAGE":              {func(v *Values) **float64 { return &v.PowerWatts }, 1, false},
	"DCGM_FI_DEV_GPU_TEMP":                 {func(v *Values) **float64 { return &v.TemperatureC }, 1, false},
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": {func(v *Values) **float64 { return &v.EnergyJoules }, 1e-3, false},
	"DCGM_FI_DEV_FB_USED":                  {func(v *Values) **float64 { return &v.FBUsedBytes }, 1 << 20, false},
	"DCGM_FI_DEV_FB_FREE":                  {func(v *Values) **float64 { return &v.FBFreeBytes }, 1 << 20, false},
}

// Parse reads a dcgm-exporter /metrics page in the Prometheus text format
// and returns the known DCGM fields by GPU UUID and GPU instance. Series
// without a UUID label, with an unparsable GPU_I_ID, or with a non-finite
// or negative value are skipped and reported in the returned warnings;
// a page that is not valid exposition text is an error naming the line.
// When several series describe the same GPU (dcgm-exporter repeats a
// GPU's fields per pod in Kubernetes mode) the first one wins.
func Parse(r io.Reader) (Fields, []string, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing dcgm-exporter metrics: %w", err)
	}
	names := make([]string, 0, len(mfs))
	for name := range mfs {
		if _, ok := fields[name]; ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := Fields{}
	var warnings []string
	for _, name := range names {
		f := fields[name]
		for _, m := range mfs[name].GetMetric() {
			key, err := keyOf(m)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			v, ok := value(m)
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				warnings = append(warnings, fmt.Sprintf("%s{UUID=%q}: unusable value", name, key.UUID))
				continue
			}
			v *= f.scale
			if f.ratio && v > 1 {
				v = 1
			}
			vals := out[key]
			if vals == nil {
				vals = &Values{}
				out[key] = vals
			}
			if dst := f.set(vals); *dst == nil {
				*dst = &v
			}
		}
	}
	return out, warnings, nil
}

func keyOf(m *dto.Metric) (Key, error) {
	k := Key{GI: -1}
	var gi string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "UUID":
			k.UUID = l.GetValue()
		case "uuid":
			if k.UUID == "" {
				k.UUID = l.GetValue()
			}
		case "GPU_I_ID":
			gi = l.GetValue()
		}
	}
	if k.UUID == "" {
		return k, fmt.Errorf("series without a UUID label")
	}
	if gi = strings.TrimSpace(gi); gi != "" {
		n, err := strconv.Atoi(gi)
		if err != nil || n < 0 {
			return k, fmt.Errorf("UUID %q: bad GPU_I_ID %q", k.UUID, gi)
		}
		k.GI = n
	}
	return k, nil
}

func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	return 0, false
}
