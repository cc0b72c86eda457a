package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Names of the baseline policies. The uncapped baseline keeps the name
// "best-effort" its users know it by (no caps: every tenant takes what it
// can get); it is not a tenant class nor the vGPU best-effort scheduler,
// though it selects the latter.
const (
	StaticEqualName = "static-equal"
	UncappedName    = "best-effort"
)

// DefaultRetryAfter is how long (on the snapshot clock) a baseline policy
// waits before it tries again a change that was refused as busy or failed.
// A change refused as not supported is never tried again.
const DefaultRetryAfter = time.Minute

// fractionEpsilon is the smallest MPS active-thread difference worth a
// client restart.
const fractionEpsilon = 0.005

// Baseline is a policy that holds one fixed target per sharing mechanism:
// it never looks at latency, only at which tenants share each GPU. It is
// what hosts do without a tuner, and the yardstick autotune is compared to.
//
//   - MPS GPUs: static-equal gives each tenant 1/n of the active threads
//     (split evenly among the tenant's clients), as the Kubernetes device
//     plugin does with 100/replicas; best-effort (uncapped) gives every
//     client 100%.
//     A change is applied with SetMPSActiveThreads followed by RestartClient,
//     because MPS applies the percentage to new contexts only.
//   - vGPU GPUs: the equal-share (static-equal) or best-effort (uncapped)
//     vGPU scheduler.
//   - time-sliced GPUs: the default compute time slice (both).
//   - MIG and exclusive GPUs, clocks and power: left alone.
type Baseline struct {
	name       string
	equal      bool
	RetryAfter time.Duration

	// initial holds the decisions Init made; the next Observe returns
	// them, so that they reach logs and reports.
	initial []Decision

	// attempted remembers changes already requested, so a change that
	// takes effect later (an MPS client restart) is not repeated every
	// tick, and refused changes are retried only after RetryAfter.
	attempted map[attemptKey]attempt
}

type attemptKey struct {
	uuid  string
	pid   uint32
	knob  gpu.Knob
	value string
}

type attempt struct {
	at        time.Time
	permanent bool // not supported: never retry
}

// NewStaticEqual returns the static-equal baseline.
func NewStaticEqual() *Baseline { return newBaseline(StaticEqualName, true) }

// NewUncapped returns the uncapped baseline (named "best-effort").
func NewUncapped() *Baseline { return newBaseline(UncappedName, false) }

func newBaseline(name string, equal bool) *Baseline {
	return &Baseline{name: name, equal: equal, RetryAfter: DefaultRetryAfter, attempted: map[attemptKey]attempt{}}
}

// Name returns the policy's name.
func (b *Baseline) Name() string { return b.name }

// Init applies the baseline's settings to the first snapshot. Refusals are
// not errors: they are retried (busy) or dropped (not supported) by Observe.
func (b *Baseline) Init(ctx context.Context, act Actuators, snap *tenant.Snapshot) error {
	d, err := b.observe(ctx, act, snap)
	b.initial = append(b.initial, d...)
	return err
}

// Observe brings every GPU of the snapshot to the baseline's settings and
// returns what it changed or tried to change. It returns an error only when
// ctx is done.
func (b *Baseline) Observe(ctx context.Context, act Actuators, snap *tenant.Snapshot) ([]Decision, error) {
	out, err := b.observe(ctx, act, snap)
	if len(b.initial) > 0 {
		out = append(b.initial, out...)
		b.initial = nil
	}
	return out, err
}

func (b *Baseline) observe(ctx context.Context, act Actuators, snap *tenant.Snapshot) ([]Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if snap == nil || snap.Readings == nil {
		return nil, nil
	}
	now := snap.Time
	if now.IsZero() {
		now = snap.Readings.Time
	}
	var out []Decision
	for i := range snap.Readings.Devices {
		d := &snap.Readings.Devices[i]
		if !d.Up {
			continue
		}
		switch d.Mode {
		case gpu.SharingMPS:
			out = append(out, b.mps(ctx, act.MPS, snap, d, now)...)
		case gpu.SharingVGPU:
			out = append(out, b.vgpu(ctx, act.VGPUScheduler, d, now)...)
		case gpu.SharingTimeSlice:
			out = append(out, b.timeSlice(ctx, act.TimeSlice, d, now)...)
		}
	}
	return out, ctx.Err()
}

// client is one MPS client process and the tenant it belongs to.
type client struct {
	pid     uint32
	tenant  string
	current *float64
}

// mpsClients returns the MPS clients on d with their tenants and the number
// of tenants sharing the GPU. A process no tenant claims counts as a tenant
// of its own (so the fallback without a tenants file is one share per
// process).
func mpsClients(snap *tenant.Snapshot, d *gpu.Device) (clients []client, perTenant map[string]int) {
	owner := map[uint32]string{}
	for _, u := range snap.Usage {
		if u.UUID != d.UUID || u.Tenant == tenant.Unassigned {
			continue
		}
		for _, pid := range u.PIDs {
			owner[pid] = u.Tenant
		}
	}
	perTenant = map[string]int{}
	for _, p := range d.Processes {
		if p.Type != gpu.ProcessMPS {
			continue
		}
		t, ok := owner[p.PID]
		if !ok {
			t = "pid " + strconv.FormatUint(uint64(p.PID), 10)
		}
		clients = append(clients, client{pid: p.PID, tenant: t, current: p.MPSActiveThreads})
		perTenant[t]++
	}
	sort.Slice(clients, func(i, j int) bool { return clients[i].pid < clients[j].pid })
	return clients, perTenant
}

func (b *Baseline) mps(ctx context.Context, ctl MPSClients, snap *tenant.Snapshot, d *gpu.Device, now time.Time) []Decision {
	clients, perTenant := mpsClients(snap, d)
	var out []Decision
	for _, c := range clients {
		target := 1.0
		reason := "best-effort: every MPS client may use all SMs"
		if b.equal {
			n := len(perTenant)
			target = 1 / float64(n) / float64(perTenant[c.tenant])
			reason = fmt.Sprintf("static-equal: %d tenants share the GPU, %d client(s) of this tenant", n, perTenant[c.tenant])
		}
		if c.current != nil && math.Abs(*c.current-target) < fractionEpsilon {
			continue
		}
		to := percent(target)
		key := attemptKey{uuid: d.UUID, pid: c.pid, knob: gpu.KnobMPSActiveThreads, value: to}
		if !b.due(key, now) {
			continue
		}
		from := ""
		if c.current != nil {
			from = percent(*c.current)
		}
		err := notSupported(gpu.KnobMPSActiveThreads)
		if ctl != nil {
			err = ctl.SetMPSActiveThreads(ctx, d.UUID, c.pid, target)
		}
		if err == nil {
			err = ctl.RestartClient(ctx, d.UUID, c.pid)
			if err != nil {
				err = fmt.Errorf("restart client: %w", err)
			}
		}
		out = append(out, b.record(key, now, Decision{
			Time: now, GPU: d.UUID, Tenant: c.tenant, Knob: gpu.KnobMPSActiveThreads,
			From: from, To: to, Reason: reason,
		}, err))
	}
	return out
}

func (b *Baseline) vgpu(ctx context.Context, ctl gpu.VGPUSchedulerActuator, d *gpu.Device, now time.Time) []Decision {
	want := gpu.VGPUSchedulerSetting{Policy: gpu.VGPUPolicyBestEffort}
	reason := "best-effort: vGPU scheduler default"
	if b.equal {
		want.Policy = gpu.VGPUPolicyEqualShare
		reason = "static-equal: equal-share vGPU scheduler"
	}
	from := ""
	if d.Scheduler != nil {
		if d.Scheduler.Policy == want.Policy && !d.Scheduler.ARREnabled && (d.Scheduler.TimeSlice == 0 || want.TimeSlice == 0) {
			return nil
		}
		from = string(d.Scheduler.Policy)
	}
	key := attemptKey{uuid: d.UUID, knob: gpu.KnobVGPUScheduler, value: string(want.Policy)}
	if !b.due(key, now) {
		return nil
	}
	err := notSupported(gpu.KnobVGPUScheduler)
	if ctl != nil {
		err = ctl.SetVGPUScheduler(ctx, d.UUID, want)
	}
	return []Decision{b.record(key, now, Decision{
		Time: now, GPU: d.UUID, Knob: gpu.KnobVGPUScheduler, From: from, To: string(want.Policy), Reason: reason,
	}, err)}
}

func (b *Baseline) timeSlice(ctx context.Context, ctl gpu.TimeSliceActuator, d *gpu.Device, now time.Time) []Decision {
	const want = gpu.TimeSliceDefault
	if d.ComputeTimeSlice == want {
		return nil
	}
	key := attemptKey{uuid: d.UUID, knob: gpu.KnobComputeTimeSlice, value: string(want)}
	if !b.due(key, now) {
		return nil
	}
	err := notSupported(gpu.KnobComputeTimeSlice)
	if ctl != nil {
		err = ctl.SetComputeTimeSlice(ctx, d.UUID, want)
	}
	return []Decision{b.record(key, now, Decision{
		Time: now, GPU: d.UUID, Knob: gpu.KnobComputeTimeSlice, From: string(d.ComputeTimeSlice), To: string(want),
		Reason: b.name + ": default compute time slice",
	}, err)}
}

// due reports whether the change under key may be requested now.
func (b *Baseline) due(key attemptKey, now time.Time) bool {
	a, seen := b.attempted[key]
	if !seen {
		return true
	}
	if a.permanent {
		return false
	}
	// Requested already (it may take effect later, as an MPS restart does)
	// or refused as busy: ask again only after RetryAfter.
	return now.Sub(a.at) >= b.RetryAfter
}

// record notes the outcome of a change and completes its decision.
func (b *Baseline) record(key attemptKey, now time.Time, d Decision, err error) Decision {
	a := attempt{at: now}
	switch {
	case err == nil:
		d.Applied = true
	case errors.Is(err, gpu.ErrNotSupported):
		a.permanent = true
		d.Reason += "; not applied: " + err.Error()
	case errors.Is(err, gpu.ErrBusy):
		d.Reason += "; not applied (will retry): " + err.Error()
	default:
		d.Reason += "; failed (will retry): " + err.Error()
	}
	b.attempted[key] = a
	return d
}

// percent renders a fraction as a percentage with at most one decimal.
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}
