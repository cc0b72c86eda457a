package webui

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The knobs of the tuner page: each GPU's knobs of its sharing mode, and
// the tuner's settings, target and in effect.

// mpsClientView is one MPS client's active-thread cap: in effect, the
// tuner's target while it differs (set, and waiting for the client's next
// context), and the cap the tuner recommends and did not set (a
// recommendation is never shown as in force or pending).
type mpsClientView struct {
	PID              uint32   `json:"pid"`
	Tenant           string   `json:"tenant,omitempty"`
	EffectiveRatio   *float64 `json:"active_threads_ratio,omitempty"`
	PendingRatio     *float64 `json:"pending_active_threads_ratio,omitempty"`
	RecommendedRatio *float64 `json:"recommended_active_threads_ratio,omitempty"`
}

// knobText is one knob of a GPU as the HTML shows it.
type knobText struct {
	Name, Value string
	Pending     bool
}

// settingView is the latest target of one knob and the value in effect.
type settingView struct {
	GPU       string         `json:"gpu"`
	GPUIndex  int            `json:"gpu_index"`
	Tenant    string         `json:"tenant,omitempty"`
	Knob      string         `json:"knob"`
	PID       uint32         `json:"pid,omitempty"`
	Mode      string         `json:"mode"`
	Target    map[string]any `json:"target"`
	Effective map[string]any `json:"effective,omitempty"`
	State     string         `json:"state"`
	At        time.Time      `json:"decided_at"`
	Text      [2]string      `json:"-"` // target, effective
}

// mpsClients are an MPS GPU's clients: each process with a cap in effect
// and each one the tuner set or recommended a cap for, with the pending cap
// while the target set differs from the one in effect, or the cap
// recommended.
func mpsClients(d *gpu.Device, snap *tenant.Snapshot, st *tuner.Status) []mpsClientView {
	owner := map[uint32]string{}
	for _, u := range snap.Usage {
		if u.UUID == d.UUID {
			for _, pid := range u.PIDs {
				owner[pid] = u.Tenant
			}
		}
	}
	var out []mpsClientView
	at := map[uint32]int{}
	for _, p := range d.Processes {
		if p.MPSActiveThreads != nil {
			at[p.PID] = len(out)
			out = append(out, mpsClientView{PID: p.PID, Tenant: owner[p.PID], EffectiveRatio: p.MPSActiveThreads})
		}
	}
	if st != nil {
		for _, s := range st.Settings {
			if s.GPU != d.UUID || s.Knob != gpu.KnobMPSActiveThreads {
				continue
			}
			i, ok := at[s.PID]
			if !ok {
				i = len(out)
				out = append(out, mpsClientView{PID: s.PID, Tenant: s.Tenant})
			}
			if f, ok := s.Effective.(tuner.Fraction); ok && out[i].EffectiveRatio == nil {
				out[i].EffectiveRatio = ptr(float64(f))
			}
			f, ok := s.Target.(tuner.Fraction)
			switch {
			case !ok:
			case s.Mode != tuner.ModeEnforce:
				out[i].RecommendedRatio = ptr(float64(f))
			case out[i].EffectiveRatio == nil || math.Abs(float64(f)-*out[i].EffectiveRatio) > 1e-6:
				out[i].PendingRatio = ptr(float64(f))
			}
		}
	}
	slices.SortFunc(out, func(a, b mpsClientView) int { return int(a.PID) - int(b.PID) })
	return out
}

// pauseView is a tenant's pause on a GPU: the fraction of each period
// the tuner pauses it, or the one it recommends and did not set (a
// recommended pause stops nobody).
type pauseView struct {
	Tenant               string   `json:"tenant"`
	DutyRatio            *float64 `json:"duty_ratio,omitempty"`
	RecommendedDutyRatio *float64 `json:"recommended_duty_ratio,omitempty"`
	// EffectiveDutyRatio is the duty in force as the pause actuator runs
	// it (nil where it does not report it): the largest of the tenant's
	// GPUs', capped; 0 where the latest freeze failed
	EffectiveDutyRatio *float64 `json:"effective_duty_ratio,omitempty"`
}

// pauses are the pause duties the tuner set on d's tenants, then those it
// recommends and did not set; a tenant the tuner does not pause (a target
// of 0: thawed, or never paused) is not listed.
func pauses(d *gpu.Device, st *tuner.Status) []pauseView {
	if st == nil {
		return nil
	}
	var set, recommended []pauseView
	for _, s := range st.Settings {
		v, ok := s.Target.(tuner.Duty)
		if !ok || s.GPU != d.UUID || s.Knob != gpu.KnobPauseDuty || v <= 0 {
			continue
		}
		if s.Mode == tuner.ModeEnforce {
			p := pauseView{Tenant: s.Tenant, DutyRatio: ptr(float64(v))}
			if e, ok := s.Effective.(tuner.Duty); ok {
				p.EffectiveDutyRatio = ptr(float64(e))
			}
			set = append(set, p)
		} else {
			recommended = append(recommended, pauseView{Tenant: s.Tenant, RecommendedDutyRatio: ptr(float64(v))})
		}
	}
	return append(set, recommended...)
}

// pauseTexts are ps as the HTML shows them, with "none" where the host can
// pause a tenant and the tuner paused none (nothing where it cannot).
func pauseTexts(ps []pauseView, st *tuner.Status) []knobText {
	if st == nil {
		return nil
	}
	var out []knobText
	if !slices.ContainsFunc(ps, func(p pauseView) bool { return p.DutyRatio != nil }) &&
		slices.ContainsFunc(st.Actuators, func(a tuner.ActuatorInfo) bool { return a.Knob == gpu.KnobPauseDuty }) {
		out = append(out, knobText{Name: "pause", Value: "none"})
	}
	for _, p := range ps {
		t := knobText{Name: "pause (" + p.Tenant + ")"}
		if p.DutyRatio != nil {
			t.Value = tuner.Duty(*p.DutyRatio).String() + " of each period" + pauseInForceText(*p.DutyRatio, p.EffectiveDutyRatio)
		} else {
			t.Value = "none (recommended: " + tuner.Duty(*p.RecommendedDutyRatio).String() + " of each period, not set)"
		}
		out = append(out, t)
	}
	return out
}

// pauseInForceText says how the pause in force differs from the duty set
// (nothing where it does not, or is not reported).
func pauseInForceText(set float64, eff *float64) string {
	switch {
	case eff == nil || tuner.Duty(*eff).String() == tuner.Duty(set).String():
		return ""
	case *eff == 0:
		return " (not in effect: its latest freeze failed, or its pause ended; the exporter's log says why)"
	case *eff > set:
		return " (in effect: " + tuner.Duty(*eff).String() + ", another of its GPUs asks for more)"
	default:
		return " (in effect: " + tuner.Duty(*eff).String() + ", capped by --pause.max)"
	}
}

func mpsClientText(c mpsClientView) knobText {
	t := knobText{Name: "MPS cap, pid " + strconv.FormatUint(uint64(c.PID), 10), Value: "unknown"}
	if c.Tenant != "" {
		t.Name += " (" + c.Tenant + ")"
	}
	if c.EffectiveRatio != nil {
		t.Value = percentText(*c.EffectiveRatio)
	}
	if c.PendingRatio != nil {
		t.Value += " (target " + percentText(*c.PendingRatio) + ", not in effect yet)"
		t.Pending = true
	}
	if c.RecommendedRatio != nil {
		t.Value += " (recommended " + percentText(*c.RecommendedRatio) + ", not set)"
	}
	return t
}

// newSettingView is the row of one setting. A clock lock's range is never
// read back (NVML has no call that returns it, and the simulator reads as
// NVML does): where the readings say the clocks are locked, as the target
// asks, its state is "locked, range not read", not "in effect", and its
// value in effect "locked" with no range.
func newSettingView(s tuner.Setting, snap *tenant.Snapshot) settingView {
	v := settingView{GPU: s.GPU, GPUIndex: s.GPUIndex, Tenant: s.Tenant, Knob: string(s.Knob),
		PID: s.PID, Mode: string(s.Mode), Target: valueJSON(s.Target), Effective: valueJSON(s.Effective),
		State: settingState(s), At: s.At, Text: [2]string{valueString(s.Target), valueString(s.Effective)}}
	if lock, ok := s.Target.(tuner.ClockRange); ok && lock != (tuner.ClockRange{}) && s.Effective == nil && s.Mode == tuner.ModeEnforce &&
		snap != nil && snap.Readings != nil {
		if d := snap.Readings.DeviceByUUID(s.GPU); d != nil && d.Up && d.ClocksLocked != nil && *d.ClocksLocked {
			v.Effective, v.State = map[string]any{"locked": true}, "locked, range not read"
			v.Text[1] = "locked (range not read)"
		}
	}
	return v
}

// settingState says whether a target is in effect: "recommended" where
// the tuner only recommends it, "pending" while the value read differs (an
// MPS cap that reaches only new contexts; a change a guard refused is no
// target), "unknown" when nothing is read.
func settingState(s tuner.Setting) string {
	switch {
	case s.Mode != tuner.ModeEnforce:
		return "recommended"
	case s.Effective == nil:
		return "unknown"
	case s.Target != nil && s.Target.String() == s.Effective.String():
		return "in effect"
	default:
		return "pending"
	}
}

// valueJSON is a knob's value for JSON, its unit in the field's name (nil
// for no value).
func valueJSON(v tuner.Value) map[string]any {
	switch x := v.(type) {
	case nil:
		return nil
	case tuner.Fraction:
		return map[string]any{"ratio": float64(x)}
	case tuner.Duty:
		return map[string]any{"duty_ratio": float64(x)}
	case tuner.Watts:
		if x == 0 {
			return map[string]any{"default": true}
		}
		return map[string]any{"watts": float64(x)}
	case tuner.ClockRange:
		return map[string]any{"min_mhz": x.MinMHz, "max_mhz": x.MaxMHz, "locked": x != tuner.ClockRange{}}
	case tuner.Level:
		return map[string]any{"level": string(x)}
	case tuner.Scheduler:
		return map[string]any{"policy": string(x.Policy)}
	case tuner.Layout:
		return map[string]any{"profiles": x.Profiles()}
	}
	return map[string]any{v.Kind(): v.String()}
}

func valueString(v tuner.Value) string {
	if v == nil {
		return "unknown"
	}
	return v.String()
}

// exitText is one line of what the exit does with the settings the tuner
// changed, as the HTML shows it.
type exitText struct {
	ID, Text string
	Bad      bool
}

// exitTexts say what the exit really does with the settings the tuner
// changed: a count is only "restored at exit" where the exit restores it.
func exitTexts(e tuner.ExitRestores) []exitText {
	var out []exitText
	if e.AtExit > 0 {
		out = append(out, exitText{ID: "restore-at-exit", Text: strconv.Itoa(e.AtExit) + " restored at exit"})
	}
	if e.WaitingForListing > 0 {
		out = append(out, exitText{ID: "waiting-for-listing", Text: strconv.Itoa(e.WaitingForListing) +
			" waiting for a snapshot to list their client: left open if the exit comes first"})
	}
	if e.ThawPending > 0 {
		out = append(out, exitText{ID: "thaw-pending", Bad: true,
			Text: strconv.Itoa(e.ThawPending) + " paused by an earlier run, whose thaw at start failed: tried again at every round and at exit"})
	}
	if e.Failed > 0 {
		out = append(out, exitText{ID: "restore-failed", Bad: true,
			Text: strconv.Itoa(e.Failed) + " whose restore failed: tried again at exit, then kept open in the journal for the next start"})
	}
	if e.KeptOpen > 0 {
		out = append(out, exitText{ID: "kept-open", Text: strconv.Itoa(e.KeptOpen) +
			" left as they are at exit (no GPU in enforce mode): kept open in the journal, restored by a later start in enforce mode"})
	}
	return out
}
