// Package policies is the registry of the tuner's policies by name: the
// baselines, autotune (with rebalancing as its slow loop) and none, each
// made fresh, for vgpusim's --policy and the exporter's --tuner.policy.
// It sits above the engine (tuner) and the policies' own packages, which
// know nothing of each other's names.
package policies

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/autotune"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/baseline"
	"github.com/vgpu-exporter/vgpu_exporter/tuner/rebalance"
)

// policies maps a registered name to its constructor.
var policies = map[string]func() tuner.Policy{
	baseline.StaticEqualName: func() tuner.Policy { return baseline.NewStaticEqual() },
	baseline.UncappedName:    func() tuner.Policy { return baseline.NewUncapped() },
	tuner.NoneName:           func() tuner.Policy { return tuner.None{} },
	autotune.Name:            func() tuner.Policy { return tuner.NewTunerPolicy(autotune.New(), rebalance.Default()) },
}

// Register adds a policy constructor under name; it replaces an
// existing one of the same name. Call it from an init function.
func Register(name string, f func() tuner.Policy) { policies[name] = f }

// Names returns the registered policy names, sorted.
func Names() []string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns a fresh policy by name. An unknown name is an error that
// lists the known ones.
func New(name string) (tuner.Policy, error) {
	f, ok := policies[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return f(), nil
}

// NewEngine returns the registered policy name when it runs on the
// tuner's engine (every policy but none), for a host that runs its own
// Tuner (the exporter). An unknown name is an error that lists the known
// ones.
func NewEngine(name string) (*tuner.TunerPolicy, error) {
	var names []string
	for _, n := range Names() {
		if _, ok := policies[n]().(*tuner.TunerPolicy); ok {
			names = append(names, n)
		}
	}
	if p, ok := policies[name]; ok {
		if tp, ok := p().(*tuner.TunerPolicy); ok {
			return tp, nil
		}
	}
	return nil, fmt.Errorf("unknown tuner policy %q (known: %s)", name, strings.Join(names, ", "))
}

// EngineNames are the registered policies NewEngine accepts,
// sorted.
func EngineNames() []string {
	var out []string
	for _, n := range Names() {
		if _, err := NewEngine(n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// SetAutotuneParams sets the autotune parameters of p (each NAME=VALUE,
// autotune.Params.Set) where p is the autotune policy; any other policy
// with parameters given is an error naming it.
func SetAutotuneParams(p tuner.Policy, specs []string) error {
	if len(specs) == 0 {
		return nil
	}
	var a *autotune.Autotune
	if tp, ok := p.(*tuner.TunerPolicy); ok {
		a, _ = tp.Decider.(*autotune.Autotune)
	}
	if a == nil {
		return fmt.Errorf("only the %s policy has parameters, not %q", autotune.Name, p.Name())
	}
	return a.P.SetAll(specs)
}
