package tuner

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A revert whose judgement is due, or a start's restore deferred to a
// round (restorehook.go) once its process is listed, waits while a hook it must not run beside still runs
// (inFlight: an MPS client's restart of its tenant, on whatever GPU, or a
// plan that moves it). Neither is among the round's actions (the revert
// is not judged yet, the restore is no policy's), so the status says
// each one and what it waits for (HookWait), and the GPU's line says it
// where nothing weighs more.

// HookWait is a revert or a restore that waits for a hook running off the
// round.
type HookWait struct {
	GPU      string // UUID
	GPUIndex int
	Tenant   string
	Knob     gpu.Knob
	PID      uint32
	// Restore is a start's restore deferred to a round (of a restarted
	// client's successor, or of a client the first snapshot did not
	// list); false for a revert (due, judged once the hook is settled).
	Restore bool
	// From and To are the change the revert or the restore would make.
	From, To string
	// Hook is the call it waits for.
	Hook HookRun
}

// hookWaits are the reverts due and the restores that wait for a hook,
// reverts first, each in its order.
func (t *Tuner) hookWaits(now time.Time) []HookWait {
	if len(t.hooks) == 0 {
		return nil
	}
	var out []HookWait
	for _, e := range t.evals {
		if now.Before(e.due) || t.watches[e.a.Target.String()] != nil {
			continue // (not due, or judged on its successor once told)
		}
		back := revertOf(e.a)
		if h := t.holder(back); h != nil {
			out = append(out, HookWait{GPU: back.GPU, GPUIndex: back.GPUIndex, Tenant: back.Tenant, Knob: back.Knob, PID: back.PID,
				From: valueText(back.Current), To: back.Want.String(), Hook: h.run()})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.restoreWaits)) {
		o, ok := t.originals[k]
		if !ok || t.awaitsListing(k) {
			continue // (one not listed yet waits for a snapshot that lists it, not for a hook)
		}
		if h := t.holder(restoreWait(o)); h != nil {
			out = append(out, HookWait{GPU: o.Target.GPU, GPUIndex: t.indexOf(o.Target.GPU), Tenant: o.Tenant, Knob: o.Target.Knob, PID: o.Target.PID,
				Restore: true, From: t.lastSet(k), To: valueText(o.Value), Hook: h.run()})
		}
	}
	return out
}

// Why says the wait, for its GPU's line: "revert of mps_active_threads
// of batch 100% → 50% waits for batch's restart hook on GPU 1, running
// since 09:14:05 UTC (40s; ...)".
func (w HookWait) Why(now time.Time) string {
	what, then := "revert", "due, judged once that hook is settled"
	if w.Restore {
		what, then = "restore", fmt.Sprintf("of PID %d, started once that hook is settled", w.PID)
	}
	hook := fmt.Sprintf("%s's restart hook on GPU %d", w.Hook.Tenant, w.Hook.GPUIndex)
	if w.Hook.Plan {
		hook = fmt.Sprintf("the rebalancing plan moving %s, started on GPU %d", w.Tenant, w.Hook.GPUIndex)
	}
	return fmt.Sprintf("%s of %s waits for %s, running since %s (%v; %s)",
		what, describeDecision(Decision{Knob: w.Knob, Tenant: w.Tenant, From: w.From, To: w.To}), hook,
		w.Hook.Since.UTC().Format("15:04:05 UTC"), now.Sub(w.Hook.Since).Round(time.Second), then)
}

// waitWhy says the waits on a GPU, for its round's line ("" for none):
// the first, and how many more.
func waitWhy(waits []HookWait, uuid string, now time.Time) string {
	return firstOnGPU(waits, uuid, func(w HookWait) string { return w.GPU }, func(w HookWait) string { return w.Why(now) })
}

// firstOnGPU says the first of xs on the GPU uuid (gpu gives each one's),
// in say's words, and how many more there are ("" for none).
func firstOnGPU[T any](xs []T, uuid string, gpu func(T) string, say func(T) string) string {
	var first T
	n := 0
	for _, x := range xs {
		if gpu(x) != uuid {
			continue
		}
		if n == 0 {
			first = x
		}
		n++
	}
	if n == 0 {
		return ""
	}
	s := say(first)
	if n > 1 {
		s += fmt.Sprintf(" (and %d more)", n-1)
	}
	return s
}

// waitsForHook keeps, or logs, an action the executor does not make
// because it waits for the hook h (inFlight): a revert due keeps its
// judgement (dueReverts), judged again at a later round; another action,
// asked for again by its policy at a later round, is logged at debug.
func (t *Tuner) waitsForHook(a Action, h *hookCall) {
	if !t.keepJudgement(a) {
		level.Debug(t.o.Logger).Log("msg", "tuner change waits for a hook of its target or tenant still running; not made this round",
			"gpu", a.GPU, "knob", a.Knob, "tenant", a.Tenant, "pid", a.PID, "to", a.Want, "hook_gpu", h.a.GPU, "hook_knob", h.a.Knob, "hook_tenant", h.a.Tenant)
		return
	}
	level.Info(t.o.Logger).Log("msg", "tuner revert due waits for a hook of its target or tenant still running; its judgement is kept, judged again once that hook is settled",
		"gpu", a.GPU, "knob", a.Knob, "tenant", a.Tenant, "pid", a.PID, "to", a.Want, "hook_gpu", h.a.GPU, "hook_knob", h.a.Knob, "hook_tenant", h.a.Tenant)
}

// keepJudgement keeps the judgement of a, a revert due the executor does
// not make this round (it waits for a hook or a restore, or a guard
// refused it), for a later round (dueReverts); false where a is no such
// revert.
func (t *Tuner) keepJudgement(a Action) bool {
	k := a.Target.String()
	e, judged := t.judged[k]
	if !a.Revert || !judged {
		return false
	}
	delete(t.judged, k)
	t.evals = append(t.evals, e)
	return true
}
