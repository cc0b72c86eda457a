package dcgmexp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// migLine is a series of GPU C in the layout dcgm-exporter uses in MIG
// mode; gi < 0 leaves GPU_I_ID out (a whole-GPU series).
func migLine(name string, gi int, v string) string {
	inst := ""
	if gi >= 0 {
		inst = fmt.Sprintf(`,GPU_I_PROFILE="%dg.71gb",GPU_I_ID="%d"`, gi+2, gi)
	}
	return fmt.Sprintf(`%s{gpu="0",UUID="%s",device="nvidia0",modelName="NVIDIA H200"%s,Hostname="node1",container="",namespace="",pod=""} %s`+"\n",
		name, uuidC, inst, v)
}

// migDevice is GPU C in MIG mode as NVML without device fields or GPM
// gives it.
func migDevice() gpu.Device {
	return gpu.Device{Index: 2, UUID: uuidC, Up: true, MIGEnabled: true, MIG: []gpu.MIGInstance{
		{GPUInstanceID: 1, Profile: "3g.71gb"}, {GPUInstanceID: 2, Profile: "4g.71gb"}}}
}

// TestMIGDeviceFields: in MIG mode dcgm-exporter serves the device-level
// fields once per GPU instance and none for the whole GPU; they fill the
// GPU's readings, the lowest GPU_I_ID's copy taken and copies that
// disagree logged once. The GPU's activity source names where its
// instances' ratios come from.
func TestMIGDeviceFields(t *testing.T) {
	real := string(readFixture(t, "dcgm-mig-device.prom"))
	withGPM := migDevice()
	withGPM.Activity = gpu.Activity{SMActive: gpu.Float(0.7), Source: "gpm"}
	withPower := migDevice()
	withPower.PowerWatts = gpu.Float(200)
	for _, tc := range []struct {
		name   string
		page   string
		dev    gpu.Device
		want   map[string]float64 // -1: absent
		source string
		warn   string // in the log once, after two samples; "" for no warning
	}{
		{"real MIG layout", real, migDevice(),
			map[string]float64{"power": 333.5, "temp": 55, "energy": 9000, "sm clock": 1410e6, "mem clock": 2619e6, "util": -1, "mem total": 0, "sm active": -1},
			ActivityDCGM, ""},
		{"copies disagree: the lowest GPU_I_ID's, whatever the order",
			migLine("DCGM_FI_DEV_POWER_USAGE", 2, "300") + migLine("DCGM_FI_DEV_POWER_USAGE", 1, "100") +
				migLine("DCGM_FI_PROF_SM_ACTIVE", 1, "0.5"),
			migDevice(), map[string]float64{"power": 100, "temp": -1}, ActivityDCGM,
			`field=DCGM_FI_DEV_POWER_USAGE min=100 max=300 used=100`},
		{"copies within 1% agree",
			migLine("DCGM_FI_DEV_POWER_USAGE", 1, "333.5") + migLine("DCGM_FI_DEV_POWER_USAGE", 2, "334.5"),
			migDevice(), map[string]float64{"power": 333.5}, "", ""},
		{"a whole-GPU series wins",
			migLine("DCGM_FI_DEV_POWER_USAGE", 1, "100") + migLine("DCGM_FI_DEV_POWER_USAGE", 2, "300") +
				migLine("DCGM_FI_DEV_POWER_USAGE", -1, "250"),
			migDevice(), map[string]float64{"power": 250}, "", ""},
		{"NVML's figure wins", real, withPower, map[string]float64{"power": 200, "temp": 55}, ActivityDCGM, ""},
		{"utilization and framebuffer stay per instance",
			migLine("DCGM_FI_DEV_GPU_UTIL", 1, "40") + migLine("DCGM_FI_DEV_GPU_UTIL", 2, "40") +
				migLine("DCGM_FI_DEV_FB_USED", 1, "10") + migLine("DCGM_FI_DEV_FB_FREE", 1, "10"),
			migDevice(), map[string]float64{"util": -1, "mem total": 0, "power": -1}, "", ""},
		{"an instance on the graphics engine names the GPU's source",
			migLine("DCGM_FI_PROF_SM_ACTIVE", 1, "0.5") + migLine("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2, "0.75"),
			migDevice(), map[string]float64{"sm active": -1}, ActivityDCGMGREngine, ""},
		{"the GPU's own GPM kept", real, withGPM, map[string]float64{"sm active": 0.7, "power": 333.5}, "gpm", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, []byte(tc.page), nil)
			inner := &fakeSource{rd: &gpu.Readings{Backend: "nvml", Devices: []gpu.Device{tc.dev}}}
			var logs bytes.Buffer
			s, err := New(inner, Options{URL: srv.URL + "/metrics", Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			var d gpu.Device
			for range 2 {
				rd, err := s.Sample(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				d = rd.Devices[0]
			}
			got := map[string]float64{"power": val(d.PowerWatts), "temp": val(d.TemperatureC), "energy": val(d.EnergyJoules),
				"sm clock": val(d.SMClockHz), "mem clock": val(d.MemClockHz), "util": val(d.GPUUtil),
				"mem total": float64(d.MemoryTotalBytes), "sm active": val(d.Activity.SMActive)}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %v, want %v", k, got[k], want)
				}
			}
			if d.Activity.Source != tc.source {
				t.Errorf("activity source %q, want %q", d.Activity.Source, tc.source)
			}
			n := strings.Count(logs.String(), "disagree")
			switch {
			case tc.warn == "" && n != 0:
				t.Errorf("unexpected warning:\n%s", logs.String())
			case tc.warn != "" && (n != 1 || !strings.Contains(logs.String(), tc.warn) ||
				!strings.Contains(logs.String(), "uuid="+uuidC) || !strings.Contains(logs.String(), "url="+srv.URL)):
				t.Errorf("want one warning with %q, uuid and URL; log:\n%s", tc.warn, logs.String())
			}
			if m := inner.rd.Devices[0]; m.PowerWatts != tc.dev.PowerWatts || m.Activity.Source != tc.dev.Activity.Source {
				t.Errorf("inner readings modified")
			}
		})
	}
}
