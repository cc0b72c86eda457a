package webui

import (
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// hookWaitView is a revert due, or a start's restore of a restarted
// client's successor, on a GPU that waits for a hook running off the
// round (tuner.HookWait): neither is among the round's decisions, so the
// GPU's line says it.
type hookWaitView struct {
	What   string       `json:"what"` // "revert" or "restore"
	Knob   string       `json:"knob"`
	Tenant string       `json:"tenant"`
	PID    uint32       `json:"pid,omitempty"`
	From   string       `json:"from"`
	To     string       `json:"to"`
	Hook   hookWaitedOn `json:"waits_for"`
	Text   string       `json:"text"`
	// OnLine is whether the round's line says it already (the HTML does
	// not say it twice).
	OnLine bool `json:"-"`
}

// hookWaitedOn is the hook a revert or a restore waits for.
type hookWaitedOn struct {
	Kind     string    `json:"kind"` // "restart" (an MPS client's) or "plan"
	GPUIndex int       `json:"gpu_index"`
	GPU      string    `json:"gpu_uuid"`
	Tenant   string    `json:"tenant,omitempty"`
	Since    time.Time `json:"running_since"`
}

// hookWaitViews are the waits on the GPU uuid, as of the tuner's latest
// round; line is the round's line there.
func hookWaitViews(st *tuner.Status, uuid, line string) []hookWaitView {
	var out []hookWaitView
	for _, w := range st.HookWaits {
		if w.GPU != uuid {
			continue
		}
		v := hookWaitView{What: "revert", Knob: string(w.Knob), Tenant: w.Tenant, PID: w.PID, From: w.From, To: w.To, Text: w.Why(st.LastRun),
			Hook: hookWaitedOn{Kind: "restart", GPUIndex: w.Hook.GPUIndex, GPU: w.Hook.GPU, Tenant: w.Hook.Tenant, Since: w.Hook.Since}}
		if w.Restore {
			v.What = "restore"
		}
		if w.Hook.Plan {
			v.Hook.Kind = "plan"
		}
		v.OnLine = strings.Contains(line, v.Text)
		out = append(out, v)
	}
	return out
}
