package main

import (
	"bytes"
	"os"
	"testing"
)

func FuzzParseSMI(f *testing.F) {
	b, err := os.ReadFile("testdata/nvidia-smi-2gpu.xml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`<nvidia_smi_log><gpu><uuid>GPU-1</uuid><clocks><sm_clock>N/A</sm_clock></clocks></gpu></nvidia_smi_log>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := ParseSMI(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(rep.GPUs) == 0 {
			t.Fatal("report without GPUs accepted")
		}
		Compare(rep, map[string]*ExporterGPU{}, DefaultTolerances)
	})
}

func FuzzParseMetrics(f *testing.F) {
	for _, name := range []string{"testdata/metrics-pass.prom", "testdata/metrics-fail.prom"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gpus, err := ParseMetrics(bytes.NewReader(data))
		if err != nil {
			return
		}
		for uuid, g := range gpus {
			if uuid == "" || g.UUID != uuid {
				t.Fatalf("bad key %q -> %+v", uuid, g)
			}
		}
	})
}
