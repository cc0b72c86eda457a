// Package sim is the GPU-sharing simulator: a backend that implements
// gpu.Source, every gpu actuator and gpu.AppMetricsSource over a model of H100/H200
// GPUs shared by time-slicing, MPS, MIG or vGPU, with workloads run as a
// roofline fluid model. It reports the raw readings a real host would give
// (processes with PIDs and cgroup paths, MIG instances with UUIDs, GPM-like
// activity, context-switch counters, clocks, power, events) and, separately,
// ground truth per tenant (Window) for judging sharing policies.
//
// The simulator is deterministic for a seed: it never reads the wall clock
// for model time and draws every random number from seeded PCG sources.
//
// Every figure the model uses, its source and whether it is a lead is in
// docs/calibration.md; the code cites its sections.
package sim

import (
	"fmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// gpuModel is the datasheet of one GPU model.
type gpuModel struct {
	Name        string // scenario name, e.g. "H100-SXM5-80GB"
	Marketing   string // NVML device name
	SMs         int
	MemBytes    uint64
	BandwidthBS float64 // peak HBM bandwidth, bytes/s
	PeakFLOPS   float64 // dense bf16 peak at max SM clock, FLOP/s
	// ComputeEff and BandwidthEff are the fractions of peak a well-tuned
	// kernel reaches (measured on one H200, docs/calibration.md, hardware).
	ComputeEff   float64
	BandwidthEff float64
	MaxClockMHz  float64
	IdleClockMHz float64
	MemClockMHz  float64
	TDPW         float64 // default power limit
	IdleW        float64 // power at idle clock with nothing running
	VGPUTypes    string  // vGPU type name prefix, e.g. "H100"
	NVLinks      uint64  // NVLink links (18 NVLink 4 links on H100/H200 SXM5)
	Profiles     []migProfile
}

// migProfile is one MIG GPU-instance profile.
type migProfile struct {
	Name        string
	SMs         int
	Compute     int // compute slices out of 7
	MemSlices   int // memory slices out of 8
	MaxCount    int
	MemoryBytes uint64
}

const gb = 1e9

// The MIG profiles of docs/calibration.md, MIG, which lists each one's SMs
// and their source: the 3g and 4g SM counts are reported on H200 (and
// taken for H100); 7g is the whole GPU's 132; the 1g and 2g counts (16 SMs
// a compute slice) and the per-profile instance counts are leads.
var (
	h100Profiles = []migProfile{
		{"1g.10gb", 16, 1, 1, 7, 10 * gb},
		{"1g.20gb", 16, 1, 2, 4, 20 * gb},
		{"2g.20gb", 32, 2, 2, 3, 20 * gb},
		{"3g.40gb", 60, 3, 4, 2, 40 * gb},
		{"4g.40gb", 64, 4, 4, 1, 40 * gb},
		{"7g.80gb", 132, 7, 8, 1, 80 * gb},
	}
	h200Profiles = []migProfile{
		{"1g.18gb", 16, 1, 1, 7, 18 * gb},
		{"1g.35gb", 16, 1, 2, 4, 35 * gb},
		{"2g.35gb", 32, 2, 2, 3, 35 * gb},
		{"3g.71gb", 60, 3, 4, 2, 71 * gb},
		{"4g.71gb", 64, 4, 4, 1, 71 * gb},
		{"7g.141gb", 132, 7, 8, 1, 141 * gb},
	}
)

// models are the GPUs a scenario may name (docs/calibration.md, hardware).
var models = []*gpuModel{
	{
		Name: "H100-SXM5-80GB", Marketing: "NVIDIA H100 80GB HBM3",
		SMs: 132, MemBytes: 80 * gb, BandwidthBS: 3.35e12, PeakFLOPS: 990e12, // NVIDIA H100 datasheet
		ComputeEff: 0.79, BandwidthEff: 0.90, // measured on H200; same silicon
		MaxClockMHz: 1980, IdleClockMHz: 345, // datasheet; idle measured
		MemClockMHz: 2619,           // H100 SXM5 HBM3 datasheet clock (docs/calibration.md, hardware)
		TDPW:        700, IdleW: 70, // SXM5 board power (datasheet; idle is a lead)
		VGPUTypes: "H100", Profiles: h100Profiles, NVLinks: 18,
	},
	{
		Name: "H200-SXM5-141GB", Marketing: "NVIDIA H200",
		SMs: 132, MemBytes: 141 * gb, BandwidthBS: 4.8e12, PeakFLOPS: 990e12, // NVIDIA H200 datasheet
		ComputeEff: 0.79, BandwidthEff: 0.90, // measured on one H200
		MaxClockMHz: 1980, IdleClockMHz: 345, MemClockMHz: 3201, // measured on one H200
		TDPW: 700, IdleW: 75,
		VGPUTypes: "H200", Profiles: h200Profiles, NVLinks: 18,
	},
}

// lockProblem says what is wrong with locking the SM clock of a GPU of
// model m to [lo, hi] MHz, "" when nothing (both 0 resets the lock).
func (m *gpuModel) lockProblem(lo, hi uint32) string {
	switch {
	case lo == 0 && hi == 0:
		return ""
	case lo == 0 || hi == 0:
		return fmt.Sprintf("locked clocks [%d, %d] MHz: give both min and max (min = max locks one value)", lo, hi)
	case lo > hi:
		return fmt.Sprintf("locked clocks [%d, %d] MHz: min is above max", lo, hi)
	case float64(hi) > m.MaxClockMHz || float64(lo) < m.IdleClockMHz:
		return fmt.Sprintf("locked clocks [%d, %d] MHz outside [%g, %g]", lo, hi, m.IdleClockMHz, m.MaxClockMHz)
	}
	return ""
}

func modelByName(name string) *gpuModel {
	for _, m := range models {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func modelNames() []string {
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.Name
	}
	return out
}

func (m *gpuModel) profile(name string) *migProfile {
	for i := range m.Profiles {
		if m.Profiles[i].Name == name {
			return &m.Profiles[i]
		}
	}
	return nil
}

// checkMIGLayout says whether the profiles fit on one GPU: at most 7 compute
// slices, 8 memory slices and each profile's maximum count.
func (m *gpuModel) checkMIGLayout(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("empty MIG layout")
	}
	compute, mem := 0, 0
	count := map[string]int{}
	for _, n := range names {
		p := m.profile(n)
		if p == nil {
			return fmt.Errorf("unknown MIG profile %q for %s (have %v)", n, m.Name, m.profileNames())
		}
		compute += p.Compute
		mem += p.MemSlices
		count[n]++
		if count[n] > p.MaxCount {
			return fmt.Errorf("MIG profile %s fits at most %d times on %s", n, p.MaxCount, m.Name)
		}
	}
	if compute > 7 || mem > 8 {
		return fmt.Errorf("MIG profiles %v do not fit on %s: %d of 7 compute slices, %d of 8 memory slices", names, m.Name, compute, mem)
	}
	return nil
}

func (m *gpuModel) profileNames() []string {
	out := make([]string, len(m.Profiles))
	for i, p := range m.Profiles {
		out[i] = p.Name
	}
	return out
}

// health is the interconnect and memory health a healthy GPU of this model
// reports: every NVLink link up and idle (the simulated workloads do not
// talk between GPUs), no PCIe traffic beyond the model's, no errors, no
// remapped rows. Page retirement is absent: Hopper remaps rows instead.
func (m *gpuModel) health(fig *figures) gpu.Health {
	return gpu.Health{
		NVLinkLinks: fig.uint(m.NVLinks), NVLinkActive: fig.uint(m.NVLinks),
		NVLinkTxBytes: fig.uint(0), NVLinkRxBytes: fig.uint(0),
		NVLinkCRCFlitErrors: fig.uint(0), NVLinkCRCDataErrors: fig.uint(0),
		NVLinkReplayErrors: fig.uint(0), NVLinkRecoveryErrors: fig.uint(0),
		PCIeTxBytesPS: fig.float(0), PCIeRxBytesPS: fig.float(0), PCIeReplays: fig.uint(0),
		RemappedRowsCorrectable: fig.uint(0), RemappedRowsUncorrectable: fig.uint(0),
		RowRemapPending: fig.bool(false), RowRemapFailure: fig.bool(false),
	}
}
