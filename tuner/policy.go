// Package tuner holds the observe -> decide -> act loop's policies: what the
// settings of a shared GPU should be, given the latest tenant snapshot.
//
// A Policy is called with every snapshot and acts through the Actuators a
// host's backends implement, so the same policy runs against real hosts and
// against the simulator (vgpusim). Every decision a policy makes is returned
// as a Decision, applied or not, with the reason, for logs, metrics and
// reports.
package tuner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// Policy decides the sharing settings of a host's GPUs.
type Policy interface {
	// Name is the policy's registered name ("static-equal", ...).
	Name() string
	// Init is called once with the first readings; it may apply initial
	// settings through act.
	Init(ctx context.Context, act Actuators, snap *tenant.Snapshot) error
	// Observe is called on every tuner tick with the latest snapshot; it may
	// act through act and returns the decisions it made (for logs/reports).
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

// policies maps a registered name to its constructor.
var policies = map[string]func() Policy{
	StaticEqualName: func() Policy { return NewStaticEqual() },
	UncappedName:    func() Policy { return NewUncapped() },
	NoneName:        func() Policy { return None{} },
	AutotuneName:    func() Policy { return NewTunerPolicy(NewAutotune(), DefaultRebalance()) },
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

// RegisterPolicy adds a policy constructor under name; it replaces an
// existing one of the same name. Call it from an init function.
func RegisterPolicy(name string, f func() Policy) { policies[name] = f }

// PolicyNames returns the registered policy names, sorted.
func PolicyNames() []string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewPolicy returns a fresh policy by name. An unknown name is an error that
// lists the known ones.
func NewPolicy(name string) (Policy, error) {
	f, ok := policies[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(PolicyNames(), ", "))
	}
	return f(), nil
}
