// Package tuner is the engine of the observe -> decide -> act loop: the
// State a policy decides from, the guard chain, the journal and the one
// executor that changes the GPUs. The policies, what the settings of a
// shared GPU should be given the latest tenant snapshot, are Deciders in
// packages of their own (tuner/autotune, tuner/baseline, tuner/rebalance,
// oracle), named in tuner/policies; the engine imports none of them.
//
// A Policy is called with every snapshot and the Actuators a host's
// backends implement, which the engine's executor alone acts through, so
// the same policy runs against real hosts and against the simulator
// (vgpusim). Every decision a policy makes is returned
// as a Decision, applied or not, with the reason, for logs, metrics and
// reports.
package tuner

import (
	"context"
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Policy decides the sharing settings of a host's GPUs.
type Policy interface {
	// Name is the policy's registered name ("static-equal", ...).
	Name() string
	// Init is called once with the first readings; it may apply initial
	// settings, through a Tuner's executor bound to act.
	Init(ctx context.Context, act Actuators, snap *tenant.Snapshot) error
	// Observe is called on every tuner tick with the latest snapshot; it may
	// act, through a Tuner's executor bound to act, and returns the
	// decisions it made (for logs/reports).
	Observe(ctx context.Context, act Actuators, snap *tenant.Snapshot) ([]Decision, error)
}

// Decision is one setting a policy chose for one GPU (and tenant, where the
// knob is per tenant).
type Decision struct {
	Time   time.Time
	GPU    string // device UUID
	Tenant string // "" for a device-wide knob
	Knob   gpu.Knob
	From   string // the setting before, as text ("" if unknown)
	To     string // the setting chosen
	Reason string
	// Applied is false when the change was refused (not supported, busy) or
	// only recommended; Reason then says why.
	Applied bool
	// Outcome and Guard are set by the Tuner: what became of the action,
	// and the guard that refused it.
	Outcome Outcome
	Guard   string
}

// String renders a decision on one line for logs.
func (d Decision) String() string {
	who := d.GPU
	if d.Tenant != "" {
		who += "/" + d.Tenant
	}
	state := "applied"
	if !d.Applied {
		state = "not applied"
	}
	if d.Outcome != "" {
		state = string(d.Outcome)
	}
	return fmt.Sprintf("%s %s %s: %q -> %q (%s; %s)", d.Time.UTC().Format(time.RFC3339Nano), who, d.Knob, d.From, d.To, state, d.Reason)
}

// NoneName is the policy that never acts.
const NoneName = "none"

// None is the policy that observes and never acts: the settings the host
// (or the scenario) started with stay as they are.
type None struct{}

// Name returns "none".
func (None) Name() string { return NoneName }

// Init does nothing.
func (None) Init(context.Context, Actuators, *tenant.Snapshot) error { return nil }

// Observe does nothing.
func (None) Observe(ctx context.Context, _ Actuators, _ *tenant.Snapshot) ([]Decision, error) {
	return nil, ctx.Err()
}
