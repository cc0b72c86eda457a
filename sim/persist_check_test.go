package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestPersistRefusesWhatTheSettersRefuse: the settings file is outside
// input (a hand-edited --sim.settings-file); a value the live setter
// refuses is refused at start, naming the file and the entry, and one it
// takes is set. A power limit of 1e9 W and a 1 THz clock lock used to be
// installed as they were (readings of 12.9 kW).
func TestPersistRefusesWhatTheSettersRefuse(t *testing.T) {
	for _, c := range []struct {
		name, sharing, entry string
		want                 string // "" = taken
	}{
		{"power in range", "mps", `"knob":"power_limit","current":{"num":400}`, ""},
		{"power default", "mps", `"knob":"power_limit","current":{}`, ""},
		{"power over TDP", "mps", `"knob":"power_limit","current":{"num":1e9}`, "power limit 1e+09 W outside [210, 700]"},
		{"power negative", "mps", `"knob":"power_limit","current":{"num":-50}`, "power limit -50 W outside"},
		{"clocks in range", "mps", `"knob":"locked_clocks","current":{"min_mhz":1200,"max_mhz":1500}`, ""},
		{"clocks reset", "mps", `"knob":"locked_clocks","current":{}`, ""},
		{"clocks 1 THz", "mps", `"knob":"locked_clocks","current":{"min_mhz":1e6,"max_mhz":1e6}`, "locked clocks [1000000, 1000000] MHz outside"},
		{"clocks min above max", "mps", `"knob":"locked_clocks","current":{"min_mhz":1500,"max_mhz":1200}`, "min is above max"},
		{"clocks one given", "mps", `"knob":"locked_clocks","current":{"max_mhz":1200}`, "give both min and max"},
		{"clocks fraction", "mps", `"knob":"locked_clocks","current":{"min_mhz":1200.5,"max_mhz":1500}`, "not whole MHz"},
		{"clocks over uint32", "mps", `"knob":"locked_clocks","current":{"min_mhz":1e10,"max_mhz":1e10}`, "not whole MHz"},
		{"mps fraction", "mps", `"knob":"mps_active_threads","pid":1,"current":{"num":0.5}`, ""},
		{"mps fraction over 1", "mps", `"knob":"mps_active_threads","pid":1,"current":{"num":7}`, "active-thread fraction 7 outside (0, 1]"},
		{"mps fraction negative", "mps", `"knob":"mps_active_threads","pid":1,"current":{"num":-0.5}`, "outside (0, 1]"},
		{"mps fraction not MPS", "time-slice", `"knob":"mps_active_threads","pid":1,"current":{"num":0.5}`, "runs no MPS server"},
		{"time slice", "time-slice", `"knob":"compute_timeslice","current":{"text":"long"}`, ""},
		{"time slice under MPS", "mps", `"knob":"compute_timeslice","current":{"text":"long"}`, "runs its clients under MPS"},
		{"time slice on vGPU", "vgpu", `"knob":"compute_timeslice","current":{"text":"long"}`, "is a vGPU host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := pauseSc(t, c.sharing)
			uuid := sc.GPUs[0].UUID
			path := filepath.Join(t.TempDir(), "settings.json")
			file := fmt.Sprintf(`[{"gpu":%q,"knob":"power_limit","current":{}},{"gpu":%q,%s}]`, uuid, uuid, c.entry)
			if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Persist(mustNew(t, sc, Options{}), path)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
				return
			case err == nil:
				t.Fatalf("%s taken; want refused (%s)", c.entry, c.want)
			}
			for _, w := range []string{"sim settings " + path + ": entry 2 (" + uuid + "/", c.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestPersistTakesItsOwnFailedChange: a change the GPU refuses leaves the
// value the GPU had in the file (a time slice under MPS); the next start
// takes the file as it is.
func TestPersistTakesItsOwnFailedChange(t *testing.T) {
	p, path := persistent(t)
	uuid := p.sc.GPUs[0].UUID
	if err := p.SetComputeTimeSlice(context.Background(), uuid, gpu.TimeSliceLong); err == nil {
		t.Fatal("time slice set under MPS")
	}
	if set, err := ReadPersisted(path); err != nil || len(set) != 1 {
		t.Fatalf("file holds %+v, %v; want the one setting", set, err)
	}
	if _, err := Persist(mustNew(t, pauseSc(t, "mps"), Options{}), path); err != nil {
		t.Fatalf("its own file refused: %v", err)
	}
}

// FuzzReadPersisted: whatever the settings file holds, reading it and
// starting with it returns (an error or a simulator) and leaves every
// power limit and clock lock one the live setters would take.
func FuzzReadPersisted(f *testing.F) {
	f.Add([]byte(`[{"gpu":"GPU-1","knob":"power_limit","initial":{"num":700},"current":{"num":1e9}}]`))
	f.Add([]byte(`[{"gpu":"GPU-1","knob":"locked_clocks","initial":{},"current":{"min_mhz":1200,"max_mhz":1500}}]`))
	f.Add([]byte(`[{"gpu":"GPU-1","knob":"mps_active_threads","pid":1,"current":{"num":0.5}},{"gpu":"GPU-1","knob":"compute_timeslice","current":{"text":"long"}}]`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[{"gpu":"GPU-1","knob":"locked_clocks","current":{"min_mhz":-1,"max_mhz":1e300}}]`))
	src := strings.Replace(pauseScenario, "SHARING", "mps, uuid: GPU-1", 1)
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPersisted(path); err != nil {
			return
		}
		s := mustNew(t, mustParse(t, src), Options{})
		if _, err := Persist(s, path); err != nil {
			return
		}
		for _, g := range s.gpus {
			if msg := g.m.powerProblem(g.powerLimit); msg != "" {
				t.Errorf("installed: %s", msg)
			}
			if g.lockMin != float64(uint32(g.lockMin)) || g.lockMax != float64(uint32(g.lockMax)) {
				t.Errorf("installed clocks [%g, %g] MHz", g.lockMin, g.lockMax)
			} else if msg := g.m.lockProblem(uint32(g.lockMin), uint32(g.lockMax)); msg != "" {
				t.Errorf("installed: %s", msg)
			}
		}
	})
}
