package simrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// LoadScenario loads a scenario file, or else the built-in scenario of
// that name. A built-in is copied with the other embedded files into a
// temporary directory first, so that it finds its companion tenants file
// and any trace it names as a file would. It returns the scenario, the
// path it was loaded from and a cleanup function. A scenario whose
// companion tenants file gives a tenant another SLO than the scenario
// judges is refused (CheckTenants).
func LoadScenario(arg string) (*sim.Scenario, string, func(), error) {
	nop := func() {}
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		sc, err := sim.LoadScenario(arg)
		if err == nil {
			err = checkCompanion(sc, arg)
		}
		if err != nil {
			return nil, "", nop, err
		}
		return sc, arg, nop, nil
	}
	b, err := scenarios.Find(arg)
	if u, ok := errors.AsType[*scenarios.UnknownError](err); ok {
		return nil, "", nop, fmt.Errorf("scenario %q: no such file and no built-in scenario of that name (built-in: %s)", arg, strings.Join(u.Known, ", "))
	}
	if err != nil {
		return nil, "", nop, err
	}
	c, err := b.Materialize()
	if err != nil {
		return nil, "", nop, err
	}
	sc, err := sim.LoadScenario(c.Scenario)
	if err == nil {
		err = checkCompanion(sc, c.Scenario)
	}
	if err != nil {
		c.Remove()
		return nil, "", nop, c.Explain(err)
	}
	return sc, c.Scenario, c.Remove, nil
}

// checkCompanion checks sc's SLOs against its companion tenants file,
// when it has one.
func checkCompanion(sc *sim.Scenario, scenarioPath string) error {
	p := Companion(scenarioPath)
	if p == "" {
		return nil
	}
	cfg, err := tenant.LoadConfig(p)
	if err != nil {
		return err
	}
	return CheckTenants(sc, cfg)
}

// CheckTenants returns an error when the tenants configuration cfg gives a
// tenant of sc another SLO than the one the scenario judges it by
// (sim.Scenario.CheckSLOs): a run must score the tuner against the
// objective it was given.
func CheckTenants(sc *sim.Scenario, cfg *tenant.Config) error {
	return sc.CheckSLOs(cfg.File, cfg.GivenSLO)
}

// Companion returns the tenants file beside a scenario file when there is
// one, else "": dir/NAME.yaml (or .yml) -> dir/NAME.tenants.yaml, as the
// exporter's --backend=sim and the built-in library name it.
func Companion(scenarioPath string) string {
	p := strings.TrimSuffix(scenarioPath, filepath.Ext(scenarioPath)) + scenarios.TenantsSuffix
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		return ""
	}
	return p
}
