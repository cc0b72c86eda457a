package tenant

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// How a GPU's sample is apportioned among its usages: their shares of its
// activity, what each holds of it, and whether those are known
// (docs/metering.md).

// activityShares are the usages' shares (0-1, adding up to at most 1) of
// the GPU's activity: their SM active share of the GPU (of a MIG instance,
// scaled by its part of the GPU's SMs); where no SM activity is known,
// their kernel-busy time, scaled down to add up to at most 1.
func activityShares(d *gpu.Device, usage []*Usage) []float64 {
	out := make([]float64, len(usage))
	var sum float64
	for i, u := range usage {
		switch {
		case u.SMActive != nil:
			f, _ := instanceFraction(d, u.GPUInstance)
			out[i] = *u.SMActive * f
		case u.KernelBusy != nil:
			out[i] = *u.KernelBusy
		}
		out[i] = max(0, out[i])
		sum += out[i]
	}
	if sum > 1 {
		for i := range out {
			out[i] /= sum
		}
	}
	return out
}

// activityKnown says whether the usages' activity on d is known, and so
// what it leaves of the GPU: every usage in a MIG instance has its
// instance's SM activity (processes outside any instance hold no SMs); on
// a whole GPU, its SM activity or some usage's kernel-busy time (NVML's
// per-process samples, which name only the processes that ran) is known,
// or the per-process utilization was read without a sample (no process
// ran: every usage at 0). A GPU or instance without usage is known idle
// where its process lists were read (on an MPS GPU the MPS clients' too:
// gpu.Device.ListsRead); where not only its own SM activity says so.
func activityKnown(d *gpu.Device, usage []*Usage) bool {
	if d.MIGEnabled {
		for _, u := range usage {
			if u.GPUInstance != "" && (u.SMActive == nil || !fractionKnown(d, u)) {
				return false
			}
		}
		return !d.ProcessesUnread || !slices.ContainsFunc(d.MIG, func(m gpu.MIGInstance) bool { return m.Activity.SMActive == nil })
	}
	for _, u := range usage {
		if u.SMActive != nil || u.KernelBusy != nil {
			return true
		}
	}
	return len(usage) == 0 && (d.ListsRead() || d.Activity.SMActive != nil) || d.NoProcessSamples
}

// figureKnown says whether u has an activity figure of its own (its share
// of the GPU's activity is then known where the others' is not).
func figureKnown(d *gpu.Device, u *Usage) bool {
	if d.MIGEnabled {
		return u.GPUInstance == "" || u.SMActive != nil && fractionKnown(d, u)
	}
	return u.SMActive != nil || u.KernelBusy != nil
}

// reservations are what each usage holds of the GPU, adding up to at
// most 1 (docs/metering.md):
//   - on a MIG GPU its instance's part of the SMs, split equally among the
//     tenants in the instance;
//   - on a whole GPU, each usage with a Reservation (MPS active-thread
//     caps, vGPU profiles) that part, all of them scaled down to add up to
//     1 where they add up to more; the usages without one split what the
//     others leave equally (all of the GPU where none has one: time
//     slicing, exclusive use). What no usage holds stays unheld.
func reservations(d *gpu.Device, usage []*Usage) []float64 {
	out := make([]float64, len(usage))
	if len(usage) == 0 {
		return out
	}
	if d.MIGEnabled {
		migReservations(d, usage, out)
		return out
	}
	var capped float64
	uncapped := 0
	for _, u := range usage {
		if u.Reservation != nil {
			capped += max(0, *u.Reservation)
		} else {
			uncapped++
		}
	}
	scale, rest := 1.0, max(0, 1-capped)
	if capped > 1 {
		scale = 1 / capped
	}
	for i, u := range usage {
		if u.Reservation != nil {
			out[i] = max(0, *u.Reservation) * scale
		} else {
			out[i] = rest / float64(uncapped)
		}
	}
	return out
}

// migReservations fills out with each usage's part of its MIG instance's
// SMs, the instance split equally among its tenants.
func migReservations(d *gpu.Device, usage []*Usage, out []float64) {
	perInstance := map[string]int{}
	for _, u := range usage {
		perInstance[u.GPUInstance]++
	}
	var sum float64
	for i, u := range usage {
		if u.GPUInstance == "" {
			continue // memory of processes outside any instance: holds no SMs
		}
		f, _ := instanceFraction(d, u.GPUInstance) // 0 where not known
		out[i] = f / float64(perInstance[u.GPUInstance])
		sum += out[i]
	}
	if sum > 1 {
		for i := range out {
			out[i] /= sum
		}
	}
}

// instanceFraction is the part of the GPU's SMs a MIG instance ("" for the
// whole GPU) has: 1 for the whole GPU. Where the GPU's SM count is not
// known (NVML knows it for a few models only), the SMs of its full-GPU
// profile stand for it: never the SMs of the instances that exist, which
// made a lone 1g instance all of the GPU. It is not known (0, false) for
// an instance the readings do not have, or whose SMs, or the GPU's, are
// not known.
func instanceFraction(d *gpu.Device, gi string) (float64, bool) {
	if gi == "" {
		return 1, true
	}
	id, err := strconv.Atoi(gi)
	if err != nil {
		return 0, false
	}
	inst := d.MIGByGI(id)
	total := cmp.Or(max(0, d.SMCount), max(0, d.MIGSMCount))
	if inst == nil || inst.SMCount <= 0 || total == 0 {
		return 0, false
	}
	return min(1, float64(inst.SMCount)/float64(total)), true
}

// fractionKnown says whether u's part of the GPU's SMs is known: its MIG
// instance's (instanceFraction), or all of a whole GPU.
func fractionKnown(d *gpu.Device, u *Usage) bool {
	_, ok := instanceFraction(d, u.GPUInstance)
	return ok
}
