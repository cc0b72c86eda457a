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
		{"mps fraction, the GPU not MPS at the start", "time-slice", `"knob":"mps_active_threads","pid":1,"current":{"num":0.5}`, ""},
		{"time slice", "time-slice", `"knob":"compute_timeslice","current":{"text":"long"}`, ""},
		{"time slice, the GPU under MPS at the start", "mps", `"knob":"compute_timeslice","current":{"text":"long"}`, ""},
		{"time slice, a vGPU host", "vgpu", `"knob":"compute_timeslice","current":{"text":"long"}`, ""},
		{"time slice unknown", "time-slice", `"knob":"compute_timeslice","current":{"text":"forever"}`, "unknown time-slice level"},
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

// TestPersistStartsFromItsOwnFile: the settings file the simulator wrote
// starts it again after run-time changes the file does not keep: an MPS
// client's fraction set on the GPU it was moved to, a time-slice level set
// on a GPU relaid out from MIG under MPS. (Both were refused at the next
// start once the file's entries were checked where the client runs and by
// the GPU's mode: the crash drill could not start again.)
func TestPersistStartsFromItsOwnFile(t *testing.T) {
	const moveSc = `name: move
gpus: [{model: H100-SXM5-80GB, sharing: mps}, {model: H100-SXM5-80GB, sharing: mps}]
tenants:
  - {name: a, gpu: 0, process: {pid: 1}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
`
	const migSc = `name: mig
gpus:
  - {model: H100-SXM5-80GB, sharing: mig, mig: [{profile: 3g.40gb, sharing: mps}]}
  - {model: H100-SXM5-80GB, sharing: time-slice}
tenants:
  - {name: a, gpu: 1, process: {pid: 1}, memory: 8GB, workload: {type: training, flops: 5e13, checkpoint_interval: 1h}}
`
	for _, tc := range []struct {
		name, sc string
		change   func(ctx context.Context, p *Persistent) error
	}{
		{"a client moved, then capped", moveSc, func(ctx context.Context, p *Persistent) error {
			g1 := p.sc.GPUs[1].UUID
			if err := p.MoveProcess(ctx, 1, g1); err != nil {
				return err
			}
			return p.SetMPSActiveThreads(ctx, g1, 1, 0.5)
		}},
		{"a GPU relaid out from MIG, then given a level", migSc, func(ctx context.Context, p *Persistent) error {
			g0 := p.sc.GPUs[0].UUID
			if err := p.ConfigureMIG(ctx, g0, nil); err != nil {
				return err
			}
			return p.SetComputeTimeSlice(ctx, g0, gpu.TimeSliceLong)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			p, err := Persist(mustNew(t, mustParse(t, tc.sc), Options{}), path)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.change(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if _, err := Persist(mustNew(t, mustParse(t, tc.sc), Options{}), path); err != nil {
				t.Errorf("the next start refuses the simulator's own file: %v", err)
			}
		})
	}
}
