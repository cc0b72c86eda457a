package tuner

import (
	"slices"
	"strconv"
	"strings"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// noteUnmatchedModes warns of the per-GPU modes (Options.GPUModes, from
// --tuner.gpu-mode) that name no GPU of the snapshot, neither its UUID nor
// its index: a typo, or a GPU gone, whose mode then applies to no GPU. It
// logs when that set changes (not while no GPU is read at all).
func (t *Tuner) noteUnmatchedModes(snap *tenant.Snapshot) {
	if len(t.o.GPUModes) == 0 || snap == nil || snap.Readings == nil || len(snap.Readings.Devices) == 0 {
		return
	}
	known := map[string]bool{}
	for _, d := range snap.Readings.Devices {
		known[d.UUID], known[strconv.Itoa(d.Index)] = true, true
	}
	var none []string
	for g, m := range t.o.GPUModes {
		if !known[g] {
			none = append(none, g+"="+string(m))
		}
	}
	slices.Sort(none)
	line := strings.Join(none, " ")
	if line == t.modesUnmatched {
		return
	}
	t.modesUnmatched = line
	if line != "" {
		level.Warn(t.o.Logger).Log("msg", "--tuner.gpu-mode names a GPU the samples do not list: its mode applies to no GPU (give a GPU's index or UUID as /metrics and /tuner show them)", "unmatched", line)
	}
}
