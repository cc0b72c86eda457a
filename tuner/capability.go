package tuner

import (
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// KnobAvailability says whether the host's backends can turn one knob on
// one GPU, as their capability lists (gpu.CapabilityLister) tell it.
type KnobAvailability struct {
	Knob gpu.Knob
	// Driven: a backend of this host implements a mechanism of the knob
	// (Actuators). A knob no backend drives is not available.
	Driven bool
	// Available: a backend of the knob's mechanisms lists it for the GPU,
	// or one of them lists no capabilities at all (unknown is not "no").
	Available bool
	// Listed are the knobs the backends of the knob's mechanisms list for
	// the GPU, where every one of them lists its capabilities; nil where
	// one lists none.
	Listed []gpu.Knob
	// Withheld says why the knob is not available where every backend
	// that drives it withholds it on the GPU (gpu.KnobWithholder): the
	// MPS controller without a restart hook. "" otherwise.
	Withheld string
}

// Why says why the knob is not available on the GPU ("" where it is).
func (k KnobAvailability) Why() string {
	switch {
	case k.Available:
		return ""
	case !k.Driven:
		return "no backend of this host drives " + string(k.Knob)
	case k.Withheld != "":
		return k.Withheld
	case len(k.Listed) == 0:
		return "not available on this GPU (its backends list no knob there)"
	}
	names := make([]string, len(k.Listed))
	for i, l := range k.Listed {
		names[i] = string(l)
	}
	return "not available on this GPU (its backends list " + strings.Join(names, ", ") + ")"
}

// knobAvailability says whether the actuators ac can turn knob k on the
// GPU uuid, by the lists of the backends of the mechanisms mechs (nil: all
// of Mechanisms): not where no backend drives it, nor where every backend
// of its mechanisms lists its capabilities (gpu.CapabilityLister) and none
// lists k for that GPU, nor where every one withholds k there
// (gpu.KnobWithholder). Where one of them lists none (it does not list
// capabilities, or lists nothing for the GPU: a backend that cannot read
// it now, a GPU down, answers so), the knob counts as available: unknown
// is not "no". caps serves the lists (nil: asked of each backend).
func knobAvailability(ac Actuators, uuid string, k gpu.Knob, mechs []Mechanism, caps capCache) KnobAvailability {
	if mechs == nil {
		mechs = Mechanisms
	}
	backs := make([]backendList, len(mechs))
	for i, m := range mechs {
		if slices.Contains(m.Knobs, k) {
			backs[i] = listOf(ac, m, uuid, caps)
		}
	}
	return availabilityFrom(k, mechs, backs)
}

// backendList is a mechanism's backend as knobAvailability looks at it for
// one GPU: whether the host has it, whether it lists capabilities, what
// it lists for the GPU, and whether it withholds its knobs there (why).
type backendList struct {
	driven, lister bool
	listed         []gpu.Knob
	backend        any
	uuid           string
}

// withheld says why b withholds knob k on its GPU; "" where it does not.
func (b backendList) withheld(k gpu.Knob) string { return withheldBy(b.backend, b.uuid, k) }

// withheldBy says why the backend b withholds knob k on the GPU uuid
// (gpu.KnobWithholder); "" where it does not.
func withheldBy(b any, uuid string, k gpu.Knob) string {
	if w, ok := b.(gpu.KnobWithholder); ok {
		return w.Withheld(uuid, k)
	}
	return ""
}

// listOf is m's backend in ac and its list for the GPU uuid (served by caps).
func listOf(ac Actuators, m Mechanism, uuid string, caps capCache) backendList {
	b, ok := ac.by[m.actuator]
	if !ok {
		return backendList{}
	}
	cl, ok := b.(gpu.CapabilityLister)
	if !ok {
		return backendList{driven: true, backend: b, uuid: uuid}
	}
	return backendList{driven: true, lister: true, listed: caps.list(cl, uuid), backend: b, uuid: uuid}
}

// availabilityFrom is knobAvailability of k from the backends of mechs,
// backs[i] that of mechs[i] (looked at where mechs[i] has k).
func availabilityFrom(k gpu.Knob, mechs []Mechanism, backs []backendList) KnobAvailability {
	out := KnobAvailability{Knob: k}
	var listed []gpu.Knob
	known, open, withheld := true, false, ""
	for i, m := range mechs {
		if !backs[i].driven || !slices.Contains(m.Knobs, k) {
			continue
		}
		out.Driven = true
		if why := backs[i].withheld(k); why != "" {
			withheld = why
			continue
		}
		open = true
		l := backs[i].listed
		if !backs[i].lister || len(l) == 0 {
			known = false
			continue
		}
		if listed == nil {
			// room for the first list at once: the backends of a
			// knob's mechanisms mostly list the same knobs
			listed = make([]gpu.Knob, 0, len(l))
		}
		listed = appendNew(listed, l...)
	}
	switch {
	case !out.Driven:
	case !open:
		out.Withheld = withheld
	case !known:
		out.Available = true
	default:
		out.Listed = listed
		out.Available = slices.Contains(listed, k)
	}
	return out
}

// capCache keeps what each backend listed for each GPU, for one round: a
// backend's list may cost a lookup under its lock (the simulator's), and
// a round looks at every knob of every GPU and at each action's.
type capCache map[capKey][]gpu.Knob

type capKey struct {
	b    gpu.CapabilityLister
	uuid string
}

// list returns cl's knobs on the GPU uuid, asking cl once a round (every
// time where c is nil, or cl cannot be a map key).
func (c capCache) list(cl gpu.CapabilityLister, uuid string) []gpu.Knob {
	if c == nil || !reflect.TypeOf(cl).Comparable() {
		return cl.Capabilities(uuid)
	}
	k := capKey{cl, uuid}
	if l, ok := c[k]; ok {
		return l
	}
	l := cl.Capabilities(uuid)
	c[k] = l
	return l
}

// errUnavailable is the error of a change refused up front, its knob not
// available on its GPU: not gpu.ErrNotSupported, which tells the guards
// that a knob can never be turned (Retry asks no more), where a list can
// change (a GPU read again, MIG turned on).
var errUnavailable = errors.New("not available on this GPU")

// knobsAvailable are the table's knobs (CountedKnobs) on the GPU uuid,
// each with its availability through ac.
// (Each mechanism's backend and list are looked up once for all the
// knobs: a round asks for every knob of every GPU.)
func knobsAvailable(ac Actuators, uuid string, caps capCache) []KnobAvailability {
	var buf [16]backendList
	backs := buf[:0]
	for _, m := range Mechanisms {
		var b backendList
		if len(m.Knobs) > 0 {
			b = listOf(ac, m, uuid, caps)
		}
		backs = append(backs, b)
	}
	out := make([]KnobAvailability, len(CountedKnobs))
	for i, k := range CountedKnobs {
		out[i] = availabilityFrom(k, Mechanisms, backs)
	}
	return out
}

// unavailable says why the executor does not try the action at all: its
// knob (each part's, for a plan) is not available on its GPU by the lists
// of the backends that would make the change (knobAvailability), so the
// change is refused up front, as the actuator would refuse it (not
// supported), with no call. A revert, and a change of a setting whose
// original the tuner keeps, are always tried: what the tuner changed, it
// tries to set back. A knob no backend drives is left to apply, which
// answers not supported (recommended only, in recommend mode). A MIG
// layout refused on a GPU whose reading in st says MIG mode is off says
// how to turn it on (NVML lists the layout only with MIG on).
func (t *Tuner) unavailable(st *State, a Action) (string, bool) {
	if a.Revert {
		return "", false
	}
	if _, kept := t.originals[a.Target.String()]; kept {
		return "", false
	}
	var mechs []Mechanism
	if a.Plan != nil && has[gpu.Rebalancer](t.o.Actuators) {
		// the hook is handed the whole plan: its list is the one that
		// tells
		mechs = slices.DeleteFunc(slices.Clone(Mechanisms), func(m Mechanism) bool { return m.actuator != reflect.TypeFor[gpu.Rebalancer]() })
	}
	for _, p := range changedTargets(a) {
		av := knobAvailability(t.o.Actuators, p.GPU, p.Knob, mechs, t.caps)
		if !av.Driven || av.Available {
			continue
		}
		why := av.Why() + migModeOff(st, p)
		if p.GPU != a.GPU || p.Knob != a.Knob {
			return string(p.Knob) + " of " + p.GPU + ": " + why, true
		}
		return why, true
	}
	return "", false
}

// migModeOff is the hint to a refused MIG layout of target p where the
// reading of its GPU in st says MIG mode is off; "" otherwise.
func migModeOff(st *State, p Target) string {
	if p.Knob != gpu.KnobMIGLayout {
		return ""
	}
	for _, d := range st.UpDevices() {
		if d.UUID == p.GPU && !d.MIGEnabled {
			return ": " + gpu.MIGModeOffHint(d.Index)
		}
	}
	return ""
}

// changedTargets are the GPUs and knobs an action changes: its own target,
// or for a plan, each move's GPU it leaves and each MIG layout's GPU.
func changedTargets(a Action) []Target {
	if a.Plan == nil {
		return []Target{a.Target}
	}
	var out []Target
	for _, m := range a.Plan.Moves {
		if m.FromUUID != "" {
			out = append(out, Target{GPU: m.FromUUID, Knob: gpu.KnobPlacement})
		}
	}
	for _, l := range a.Plan.MIG {
		out = append(out, Target{GPU: l.UUID, Knob: gpu.KnobMIGLayout})
	}
	return out
}

// gpuKnobs are, by GPU UUID, the knobs of each GPU of the snapshot
// (knobsAvailable), as the round's policy decides on them (State.Knobs),
// its status shows them and its executor refuses a change by them.
func (t *Tuner) gpuKnobs(snap *tenant.Snapshot) map[string][]KnobAvailability {
	out := map[string][]KnobAvailability{}
	if snap == nil || snap.Readings == nil {
		return out
	}
	for _, d := range snap.Readings.Devices {
		out[d.UUID] = knobsAvailable(t.o.Actuators, d.UUID, t.caps)
	}
	return out
}

// noteKnobs puts into each GPU's line of the round the knobs the host's
// backends can turn there (knobs, the round's State.Knobs), and logs a
// GPU's knobs at info level when it is first read, and again when they
// change (not while it cannot be read: its backends list nothing then).
func (t *Tuner) noteKnobs(snap *tenant.Snapshot, knobs map[string][]KnobAvailability) {
	up := map[string]bool{}
	if snap != nil && snap.Readings != nil {
		for _, d := range snap.Readings.Devices {
			up[d.UUID] = d.Up
		}
	}
	if t.knobsLogged == nil {
		t.knobsLogged = map[string]string{}
	}
	for i := range t.rounds {
		r := &t.rounds[i]
		r.Knobs = knobs[r.GPU]
		avail, unlisted, undriven := SplitKnobs(r.Knobs)
		a, n, d := JoinKnobs(avail, " "), JoinKnobs(unlisted, " "), JoinKnobs(undriven, " ")
		line := a + "|" + n + "|" + d
		if !up[r.GPU] || t.knobsLogged[r.GPU] == line {
			continue
		}
		t.knobsLogged[r.GPU] = line
		level.Info(t.o.Logger).Log("msg", "tuner knobs of GPU", "gpu", r.GPUIndex, "uuid", r.GPU, "available", a, "not_listed", n, "no_backend", d)
	}
}

// SplitKnobs parts ks, in order, into the knobs available, those a
// backend drives but its list leaves out on the GPU, and those no backend
// drives.
func SplitKnobs(ks []KnobAvailability) (available, notListed, noBackend []KnobAvailability) {
	for _, k := range ks {
		switch {
		case k.Available:
			available = append(available, k)
		case k.Driven:
			notListed = append(notListed, k)
		default:
			noBackend = append(noBackend, k)
		}
	}
	return available, notListed, noBackend
}

// JoinKnobs are the knobs' names joined by sep.
func JoinKnobs(ks []KnobAvailability, sep string) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = string(k.Knob)
	}
	return strings.Join(names, sep)
}
