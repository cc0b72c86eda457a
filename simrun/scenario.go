package simrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/scenarios"
	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// loadTenants loads a tenants file for a run: one that defines no
// tenants is refused, as the exporter refuses it by default (everything
// would be unassigned, and no policy could act for a tenant).
func loadTenants(path string) (*tenant.Config, error) {
	cfg, err := tenant.LoadConfig(path)
	if err == nil {
		err = tenant.NotEmpty(cfg)
	}
	return cfg, err
}

// LoadScenario loads a scenario file, or else the built-in scenario of
// that name, straight from its library (the traces it names and its
// companion tenants file read there too, nothing written to disk), with
// its companion tenants configuration (NAME.tenants.yaml beside it; nil
// when it has none). A scenario whose companion gives a tenant another SLO
// than the scenario judges is refused (CheckTenants).
func LoadScenario(arg string) (*sim.Scenario, *tenant.Config, error) {
	if IsFile(arg) {
		sc, err := sim.LoadScenario(arg)
		if err != nil {
			if strings.HasSuffix(arg, scenarios.TenantsSuffix) {
				// its keys are all unknown to a scenario: say why
				err = fmt.Errorf("%w\n%s is named as a tenants file: give it with --tenants, and the scenario (%s) with --scenario",
					err, arg, strings.TrimSuffix(arg, scenarios.TenantsSuffix)+".yaml")
			}
			return nil, nil, err
		}
		var cfg *tenant.Config
		if p := Companion(arg); p != "" {
			if cfg, err = loadTenants(p); err != nil {
				return nil, nil, err
			}
		}
		return checked(sc, cfg)
	}
	b, err := scenarios.Find(arg)
	if u, ok := errors.AsType[*scenarios.UnknownError](err); ok {
		known := strings.Join(u.Known, ", ")
		// a path that is there but is no file to read says what it is
		if st, serr := os.Stat(arg); serr == nil && st.IsDir() {
			return nil, nil, fmt.Errorf("scenario %q is a directory, not a scenario file, and no built-in scenario has that name (built-in: %s)", arg, known)
		} else if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("scenario %q: %v, and no built-in scenario has that name (built-in: %s)", arg, serr, known)
		}
		return nil, nil, fmt.Errorf("scenario %q: no such file and no built-in scenario of that name (built-in: %s)", arg, known)
	}
	if err != nil {
		return nil, nil, err
	}
	sc, err := sim.LoadScenarioFS(b.FS, b.Path)
	if err != nil {
		return nil, nil, b.Explain(err)
	}
	name, data, err := b.Tenants()
	if err != nil || name == "" {
		return sc, nil, err
	}
	cfg, err := tenant.ParseConfig(name, data)
	if err == nil {
		sc, cfg, err = checked(sc, cfg)
	}
	if err != nil {
		return nil, nil, b.Explain(err)
	}
	return sc, cfg, nil
}

// checked returns sc and its companion tenants configuration cfg (nil:
// none), or an error when they disagree (CheckTenants).
func checked(sc *sim.Scenario, cfg *tenant.Config) (*sim.Scenario, *tenant.Config, error) {
	if cfg != nil {
		if err := CheckTenants(sc, cfg); err != nil {
			return nil, nil, err
		}
	}
	return sc, cfg, nil
}

// CheckTenants returns an error when the tenants configuration cfg gives a
// tenant of sc another SLO than the one the scenario judges it by
// (sim.Scenario.CheckSLOs), or leaves out a tenant the scenario judges an
// SLO of (sim.Scenario.CheckJudgedDefined): a run must score the tuner
// against the objective it was given; or when one of its sim:// latency sources could
// never be read from the scenario's simulator (tenant.Config.CheckSimSources):
// the tuner would not see that tenant's latency; or when a tenant it judges
// is not, to the tuner, that tenant's own processes and latency: its
// process is attributed to another tenant (or to none), another's process
// to it, or its sim:// source reads another tenant's application
// (checkAttribution).
func CheckTenants(sc *sim.Scenario, cfg *tenant.Config) error {
	if err := sc.CheckSLOs(cfg.File, cfg.GivenSLO); err != nil {
		return err
	}
	if err := sc.CheckJudgedDefined(cfg.File, func(name string) bool {
		_, _, _, _, found := cfg.GivenSLO(name)
		return found
	}); err != nil {
		return err
	}
	s, err := sim.New(sc, sim.Options{})
	if err != nil {
		return err
	}
	if err := cfg.CheckSimSources(s); err != nil {
		return err
	}
	return checkAttribution(sc, cfg)
}

// IsFile reports whether LoadScenario reads arg as a scenario file (a
// file of that path exists) rather than as the name of a built-in one.
func IsFile(arg string) bool {
	st, err := os.Stat(arg)
	return err == nil && !st.IsDir()
}

// Companion returns the tenants file beside a scenario file when there is
// one, else "": dir/NAME.yaml (or .yml) -> dir/NAME.tenants.yaml, as the
// exporter's --backend=sim and the built-in library name it. Anything of
// that name is the companion, to be read as a tenants file: a directory,
// a link to nothing or another file that is not a regular one is then
// refused naming it (loadTenants), not taken as no tenants file, which
// would run the scenario with every process unassigned.
func Companion(scenarioPath string) string {
	p := strings.TrimSuffix(scenarioPath, filepath.Ext(scenarioPath)) + scenarios.TenantsSuffix
	if _, err := os.Lstat(p); err != nil {
		return ""
	}
	return p
}
