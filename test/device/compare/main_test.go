package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		want     []string // substrings of stdout
		wantErr  string   // substring of stderr
		failRows []string // checks that must FAIL
	}{
		{"pass", []string{"--metrics", "testdata/metrics-pass.prom", "--smi", "testdata/nvidia-smi-2gpu.xml"}, 0,
			[]string{"PASS", "GPU count", "memory total (MiB)", "utilization", "N/A", "absent", "power draw (W)", "power limit (W)",
				"temperature (°C)", "MIG mode", "persistence mode"}, "", nil},
		{"fail", []string{"--metrics", "testdata/metrics-fail.prom", "--smi", "testdata/nvidia-smi-2gpu.xml"}, 1,
			[]string{"\nFAIL\n"}, "", []string{"GPU count", "memory total (MiB)", "SM clock (MHz)", "utilization", "UUID known to nvidia-smi",
				"power draw (W)", "power limit (W)", "temperature (°C)", "MIG mode", "persistence mode"}},
		{"tight clock tolerance", []string{"--metrics", "testdata/metrics-pass.prom", "--smi", "testdata/nvidia-smi-2gpu.xml", "--tol.sm-clock=0.001"}, 1,
			nil, "", []string{"SM clock (MHz)"}},
		{"missing flags", nil, 2, nil, "required", nil},
		{"metrics not a vgpu page", []string{"--metrics", "testdata/nvidia-smi-2gpu.xml", "--smi", "testdata/nvidia-smi-2gpu.xml"}, 2, nil, "metrics", nil},
		{"smi not XML", []string{"--metrics", "testdata/metrics-pass.prom", "--smi", "testdata/metrics-pass.prom"}, 2, nil, "nvidia-smi XML", nil},
		{"no file", []string{"--metrics", "testdata/none", "--smi", "testdata/nvidia-smi-2gpu.xml"}, 2, nil, "no such file", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tc.wantErr != "" && !strings.Contains(errb.String(), tc.wantErr) {
				t.Errorf("stderr lacks %q: %s", tc.wantErr, errb.String())
			}
			for _, check := range tc.failRows {
				found := false
				for _, line := range strings.Split(out.String(), "\n") {
					if strings.Contains(line, check) && strings.HasSuffix(strings.TrimSpace(line), "FAIL") {
						found = true
					}
				}
				if !found {
					t.Errorf("no failing row for %q:\n%s", check, out.String())
				}
			}
		})
	}
}

func TestCompareRows(t *testing.T) {
	f, err := os.Open("testdata/nvidia-smi-2gpu.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	smi, err := ParseSMI(f)
	if err != nil {
		t.Fatal(err)
	}
	if smi.DriverVersion != "550.54.15" || len(smi.GPUs) != 2 || smi.GPUs[1].CurrentMIG != "Enabled" {
		t.Fatalf("parsed %+v", smi)
	}
	// Both power layouts: gpu_power_readings (R535+) and power_readings.
	for i, want := range [][2]string{{"612.40 W", "700.00 W"}, {"98.20 W", "700.00 W"}} {
		if draw, limit := smi.GPUs[i].power(); draw != want[0] || limit != want[1] {
			t.Errorf("GPU %d power %q %q, want %q", i, draw, limit, want)
		}
	}
	util := 0.5
	for _, tc := range []struct {
		name string
		exp  map[string]*ExporterGPU
		pass bool
	}{
		{"utilization within tolerance", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(0.8), SMClock: ptr(1.9e9), MemTotal: ptr(143771 << 20)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, true},
		{"utilization off", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: &util, SMClock: ptr(1.9e9), MemTotal: ptr(143771 << 20)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
		{"utilization on a MIG GPU where nvidia-smi says N/A", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", Utilization: ptr(0), SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
		{"memory one MiB off", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143770 << 20)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, true},
		{"memory missing", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
		{"low power draw within 30 W (old XML layout)", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20), Power: ptr(125)},
		}, true},
		{"power draw off by more than 25%", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20), Power: ptr(400)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
		{"power limit missing", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20), PowerLimit: ptr(-1)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
		{"temperature 5 °C off", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20), Temperature: ptr(46)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, true},
		{"MIG GPU reported as another mode", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "time-slice", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
		{"persistence off", map[string]*ExporterGPU{
			"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {Utilization: ptr(1), SMClock: ptr(1.98e9), MemTotal: ptr(143771 << 20), Persistence: ptr(0)},
			"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {Mode: "mig", SMClock: ptr(345e6), MemTotal: ptr(143771 << 20)},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for uuid, g := range tc.exp {
				withReportFigures(uuid, g)
			}
			var out bytes.Buffer
			if got := Print(&out, Compare(smi, tc.exp, DefaultTolerances)); got != tc.pass {
				t.Errorf("pass = %v, want %v\n%s", got, tc.pass, out.String())
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }

// withReportFigures sets the power, power limit, temperature and
// persistence a case leaves nil to the figures of nvidia-smi-2gpu.xml; a
// figure set to -1 is removed (the series is absent).
func withReportFigures(uuid string, g *ExporterGPU) {
	report := map[string][4]float64{ // power, limit, temperature, persistence
		"GPU-3a7cf3e9-f132-4b73-906a-846f19a492b8": {612.4, 700, 41, 1},
		"GPU-df4971be-7b6b-4e95-8f1f-4879efd3bb68": {98.2, 700, 33, 1},
	}[uuid]
	for i, f := range []**float64{&g.Power, &g.PowerLimit, &g.Temperature, &g.Persistence} {
		switch {
		case *f == nil:
			*f = ptr(report[i])
		case **f == -1:
			*f = nil
		}
	}
}
