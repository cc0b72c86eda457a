package tuner

import (
	"fmt"
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
	if changedTo(&t.modesUnmatched, strings.Join(none, " ")) {
		level.Warn(t.o.Logger).Log("msg", "--tuner.gpu-mode names a GPU the samples do not list: its mode applies to no GPU (give a GPU's index or UUID as /metrics and /tuner show them)", "unmatched", t.modesUnmatched)
	}
}

// noteConflictingModes logs, at error level, the GPUs of the snapshot
// given a mode both by UUID and by index, two different ones: which of the
// flags was meant cannot be told, so the safer mode applies (modeOf). The
// index a GPU has is known only once it is read, so this cannot be refused
// at start as the same GPU named twice alike is; it is logged at the first
// snapshot and again whenever the set changes (a GPU gone, or its index
// taken by another after a restart).
func (t *Tuner) noteConflictingModes(snap *tenant.Snapshot) {
	if len(t.o.GPUModes) < 2 || snap == nil || snap.Readings == nil {
		return
	}
	var both []string
	for _, d := range snap.Readings.Devices {
		byUUID, u := t.o.GPUModes[d.UUID]
		byIndex, i := t.o.GPUModes[strconv.Itoa(d.Index)]
		if u && i && byUUID != byIndex {
			both = append(both, fmt.Sprintf("--tuner.gpu-mode=%s=%s and --tuner.gpu-mode=%d=%s: %s", d.UUID, byUUID, d.Index, byIndex, saferMode(byUUID, byIndex)))
		}
	}
	slices.Sort(both)
	if changedTo(&t.modesConflicting, strings.Join(both, "; ")) {
		level.Error(t.o.Logger).Log("msg", "--tuner.gpu-mode gives a GPU two modes, by its UUID and by its index: the safer one applies (off, then recommend, then enforce); give each GPU one mode", "gpus", t.modesConflicting)
	}
}

// changedTo sets *last to line and reports whether line is new and not
// empty: a set of GPUs logged once, and again only when it changes.
func changedTo(last *string, line string) bool {
	if line == *last {
		return false
	}
	*last = line
	return line != ""
}

// enforcedOn reports whether the GPU uuid is in enforce mode, for the
// restores, which call an actuator on no other GPU. A GPU the latest
// snapshot does not list (none yet, or fallen off the bus) has no index:
// it is taken to be in enforce only where every mode it could have is
// (possibleModes): its UUID's, else the host's, and no mode given by
// index, which could be its own, another one.
func (t *Tuner) enforcedOn(uuid string) bool {
	return !slices.ContainsFunc(t.possibleModes(uuid), func(m Mode) bool { return m != ModeEnforce })
}

// outOfEnforce reports whether the GPU uuid is known not to be in enforce
// mode: none of the modes it could have is (possibleModes).
func (t *Tuner) outOfEnforce(uuid string) bool {
	return !slices.Contains(t.possibleModes(uuid), ModeEnforce)
}

// possibleModes is the mode of the GPU uuid where the latest snapshot
// lists it (by its index); where it does not, every mode it could have:
// with no index, and with each index a mode is given by.
func (t *Tuner) possibleModes(uuid string) []Mode {
	if i := t.indexOf(uuid); i >= 0 {
		return []Mode{t.modeOf(uuid, i)}
	}
	out := []Mode{t.modeOf(uuid, -1)}
	for g := range t.o.GPUModes {
		if i, err := strconv.Atoi(g); err == nil {
			out = append(out, t.modeOf(uuid, i))
		}
	}
	return out
}

// gpuModes is the mode of each GPU the snapshot lists, by UUID
// (State.Modes).
func (t *Tuner) gpuModes(snap *tenant.Snapshot) map[string]Mode {
	out := map[string]Mode{}
	if snap == nil || snap.Readings == nil {
		return out
	}
	for _, d := range snap.Readings.Devices {
		out[d.UUID] = t.modeOf(d.UUID, d.Index)
	}
	return out
}

// actionMode is the mode a's change is made in: its GPU's; for a plan,
// the safest of the modes of every GPU it changes (each move's source and
// destination, each MIG layout's GPU; a move to anywhere the orchestrator
// chooses, every GPU's), so that no plan changes a GPU in off or
// recommend, whichever GPU its first step starts from.
func (t *Tuner) actionMode(a Action) Mode {
	mode := t.modeOf(a.GPU, a.GPUIndex)
	if a.Plan == nil {
		return mode
	}
	var gpus []string
	for _, m := range a.Plan.Moves {
		gpus = append(gpus, m.FromUUID, m.ToUUID)
		if m.ToUUID == "" && t.last != nil && t.last.Readings != nil {
			for _, d := range t.last.Readings.Devices {
				gpus = append(gpus, d.UUID)
			}
		}
	}
	for _, l := range a.Plan.MIG {
		gpus = append(gpus, l.UUID)
	}
	for _, uuid := range gpus {
		if uuid == "" {
			continue
		}
		for _, m := range t.possibleModes(uuid) {
			mode = saferMode(mode, m)
		}
	}
	return mode
}
