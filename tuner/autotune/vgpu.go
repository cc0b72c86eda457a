package autotune

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// vgpuNote is the part of a vGPU scheduler reason that says when the
// change can be made.
const vgpuNote = "NVML changes the vGPU scheduler only while no VM runs on the GPU, so this is a recommendation for the next time its VMs are stopped"

// runlistWeights returns the weight of each software runlist in the
// scheduler log, by runlist ID (its latest entry's; 0 when the driver does
// not fill it).
func runlistWeights(log []gpu.VGPUSchedulerLogEntry) map[uint32]uint32 {
	ws := map[uint32]uint32{}
	for _, e := range log {
		ws[e.Runlist] = e.Weight
	}
	return ws
}

// weighted reports whether at least two runlists have known weights that
// differ: only then does fixed share give some VM more than the others.
func weighted(ws map[uint32]uint32) bool {
	lo, hi := ^uint32(0), uint32(0)
	for _, w := range ws {
		if w == 0 {
			return false
		}
		lo, hi = min(lo, w), max(hi, w)
	}
	return len(ws) >= 2 && hi > lo
}

func meanWeight(ws map[uint32]uint32) float64 {
	if len(ws) == 0 {
		return 0
	}
	sum := 0.0
	for _, w := range ws {
		sum += float64(w)
	}
	return sum / float64(len(ws))
}

// weightsText lists the weights by runlist ID ("runlist 0: 3, runlist 1: 1").
func weightsText(ws map[uint32]uint32) string {
	ids := make([]uint32, 0, len(ws))
	for id := range ws {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("runlist %d: %d", id, ws[id])
	}
	return strings.Join(parts, ", ")
}
