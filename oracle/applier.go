package oracle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// applier brings GPUs to a phase's settings through the actuators,
// changing only what differs from what it applied before.
type applier struct {
	mps    tuner.MPSClients
	ts     gpu.TimeSliceActuator
	clocks gpu.ClockPowerActuator
	mig    gpu.MIGActuator
	drain  gpu.MIGDrainActuator
	life   gpu.TenantLifecycleActuator
	sample func(context.Context) (*gpu.Readings, error)
	// relayout is, by GPU, the MIG layout waiting for its instances to
	// drain; pids, by GPU UUID, the processes placed there.
	relayout map[int][]string
	pids     map[string][]uint32
	uuids    []string
	maxMHz   []uint32
	caps     map[uint32]float64
	slices   []gpu.TimeSliceLevel
	locked   []bool
	// where each PID's GPU is, by UUID
	gpuOf func(pid uint32) string
}

func newApplier(s *sim.Simulator, act tuner.Actuators, maxMHz []uint32) *applier {
	ap := &applier{mps: act.MPS, ts: act.TimeSlice, clocks: act.ClockPower,
		mig: act.MIG, drain: act.MIGDrain, life: act.Lifecycle,
		maxMHz: maxMHz, caps: map[uint32]float64{}, sample: s.Sample,
		slices: make([]gpu.TimeSliceLevel, len(maxMHz)), locked: make([]bool, len(maxMHz)),
		relayout: map[int][]string{}, pids: map[string][]uint32{}}
	r, err := s.Sample(context.Background())
	if err == nil {
		ap.uuids = make([]string, len(maxMHz))
		pidGPU := map[uint32]string{}
		for _, d := range r.Devices {
			if d.Index < len(ap.uuids) {
				ap.uuids[d.Index] = d.UUID
			}
			for _, pr := range d.Processes {
				pidGPU[pr.PID] = d.UUID
				ap.pids[d.UUID] = append(ap.pids[d.UUID], pr.PID)
			}
		}
		ap.gpuOf = func(pid uint32) string { return pidGPU[pid] }
	}
	return ap
}

// apply brings every GPU to ph's settings; a refused change is skipped
// (it then shows in the replay's figures). It returns the decisions.
func (a *applier) apply(ctx context.Context, now time.Time, ph phase) []tuner.Decision {
	var out []tuner.Decision
	note := func(g int, who string, k gpu.Knob, from, to string, err error) {
		d := tuner.Decision{Time: now, GPU: a.uuids[g], Tenant: who, Knob: k, From: from, To: to, Applied: err == nil, Reason: "oracle: best static setting of this phase"}
		if err != nil {
			d.Reason = err.Error()
		}
		out = append(out, d)
	}
	if a.uuids == nil {
		return nil
	}
	for g, s := range ph.GPUs {
		uuid := a.uuids[g]
		pids := make([]uint32, 0, len(s.Caps))
		for pid := range s.Caps {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		for _, pid := range pids {
			f := s.Caps[pid]
			cur, ok := a.caps[pid]
			if !ok {
				cur = 1
			}
			if f == cur || a.mps == nil {
				continue
			}
			at := cmpStr(a.gpuOf(pid), uuid)
			err := a.mps.SetMPSActiveThreads(ctx, at, pid, f)
			if err == nil {
				err = a.mps.RestartClient(ctx, at, pid)
			}
			if err == nil {
				a.caps[pid] = f
			}
			note(g, strconv.FormatUint(uint64(pid), 10), gpu.KnobMPSActiveThreads, fmtFrac(cur), fmtFrac(f), err)
		}
		if s.TimeSlice != "" && s.TimeSlice != cmpLevel(a.slices[g]) && a.ts != nil {
			err := a.ts.SetComputeTimeSlice(ctx, uuid, s.TimeSlice)
			if err == nil {
				note(g, "", gpu.KnobComputeTimeSlice, string(cmpLevel(a.slices[g])), string(s.TimeSlice), nil)
				a.slices[g] = s.TimeSlice
			}
		}
		if s.Layout != nil {
			out = append(out, a.startRelayout(ctx, now, g, s.Layout)...)
		}
		if s.Lock != a.locked[g] && a.clocks != nil && a.maxMHz[g] > 0 {
			l := gpu.ClockLock{}
			if s.Lock {
				l = gpu.ClockLock{MinMHz: a.maxMHz[g], MaxMHz: a.maxMHz[g]}
			}
			err := a.clocks.LockClocks(ctx, uuid, l)
			if err == nil {
				a.locked[g] = s.Lock
			}
			note(g, "", gpu.KnobLockedClocks, lockText(!s.Lock, a.maxMHz[g]), lockText(s.Lock, a.maxMHz[g]), err)
		}
	}
	return out
}

// startRelayout drains every MIG instance of GPU g so that progress can
// set layout once they are empty.
func (a *applier) startRelayout(ctx context.Context, now time.Time, g int, layout []string) []tuner.Decision {
	d := tuner.Decision{Time: now, GPU: a.uuids[g], Knob: gpu.KnobMIGDrain, To: "every instance",
		Reason: "oracle: relayout to [" + strings.Join(layout, ", ") + "]"}
	err := notDriven(a.mig != nil && a.drain != nil && a.life != nil, "MIG relayout")
	var r *gpu.Readings
	if err == nil {
		r, err = a.sample(ctx)
	}
	for _, dev := range readingsDevices(r) {
		if dev.Index != g {
			continue
		}
		for _, inst := range dev.MIG {
			err = cmp(err, a.drain.DrainMIGInstance(ctx, dev.UUID, inst.UUID))
		}
	}
	d.Applied = err == nil
	if err != nil {
		d.Reason = err.Error()
		return []tuner.Decision{d}
	}
	a.relayout[g] = layout
	return append([]tuner.Decision{d}, a.progress(ctx, now)...)
}

// pending tells whether a relayout waits for its instances to drain.
func (a *applier) pending() bool { return len(a.relayout) > 0 }

// progress sets each waiting layout whose instances are empty and starts
// the GPU's processes again in it.
func (a *applier) progress(ctx context.Context, now time.Time) []tuner.Decision {
	var out []tuner.Decision
	for g, layout := range a.relayout {
		uuid := a.uuids[g]
		err := a.mig.ConfigureMIG(ctx, uuid, layout)
		if errors.Is(err, gpu.ErrBusy) {
			continue
		}
		delete(a.relayout, g)
		d := tuner.Decision{Time: now, GPU: uuid, Knob: gpu.KnobMIGLayout, To: "[" + strings.Join(layout, ", ") + "]",
			Applied: err == nil, Reason: "oracle: best static setting of this phase"}
		if err != nil {
			d.Reason = err.Error()
		}
		out = append(out, d)
		for _, pid := range a.pids[uuid] {
			err := a.life.StartProcess(ctx, pid)
			out = append(out, tuner.Decision{Time: now, GPU: uuid, Tenant: strconv.FormatUint(uint64(pid), 10),
				Knob: gpu.KnobProcessLifecycle, To: "started", Applied: err == nil, Reason: "oracle: after the relayout"})
		}
	}
	return out
}

func readingsDevices(r *gpu.Readings) []gpu.Device {
	if r == nil {
		return nil
	}
	return r.Devices
}

func notDriven(ok bool, what string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("%s: %w", what, gpu.ErrNotSupported)
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cmpLevel(l gpu.TimeSliceLevel) gpu.TimeSliceLevel {
	if l == "" {
		return gpu.TimeSliceDefault
	}
	return l
}

func fmtFrac(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func lockText(locked bool, mhz uint32) string {
	if !locked {
		return "dvfs"
	}
	return fmt.Sprintf("%d MHz", mhz)
}
