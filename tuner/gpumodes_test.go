package tuner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A per-GPU mode naming no GPU the samples list (an index or UUID that
// is not there) is warned of, once while it stays so; modes that name a
// GPU, by index or UUID, are not.
func TestUnmatchedGPUModeWarned(t *testing.T) {
	for _, c := range []struct {
		name   string
		modes  map[string]Mode
		warned string
	}{
		{"by index", map[string]Mode{"0": ModeEnforce}, ""},
		{"by UUID", map[string]Mode{uuid0: ModeEnforce}, ""},
		{"an index not there", map[string]Mode{"5": ModeEnforce}, `unmatched="5=enforce"`},
		{"a UUID mistyped", map[string]Mode{"0": ModeRecommend, "GPU-0X": ModeEnforce}, `unmatched="GPU-0X=enforce"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := &strings.Builder{}
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Clock: gpu.NewManualClock(t0), Mode: ModeRecommend, GPUModes: c.modes,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := tu.RunOnce(context.Background(), emptySnap(t0.Add(time.Duration(i)*time.Second))); err != nil {
					t.Fatal(err)
				}
			}
			n := strings.Count(out.String(), "--tuner.gpu-mode names a GPU the samples do not list")
			if c.warned == "" && n != 0 || c.warned != "" && (n != 1 || !strings.Contains(out.String(), c.warned)) {
				t.Errorf("%d warnings, want %q once (none where empty); log:\n%s", n, c.warned, out)
			}
		})
	}
}

// twoGPUs reads GPU-a at index 0 and GPU-b at index 1; without b, GPU-b
// is not listed (fallen off the bus).
func twoGPUs(b bool) []gpu.Device {
	devs := []gpu.Device{{UUID: "GPU-a", Index: 0, Up: true}}
	if b {
		devs = append(devs, gpu.Device{UUID: "GPU-b", Index: 1, Up: true})
	}
	return devs
}

// A GPU given a mode by UUID and another by index gets the safer of the
// two, whichever way round, and an error names both flags, once while it
// stays so; the same mode both ways is no error.
func TestGPUModeByUUIDAndIndex(t *testing.T) {
	for _, c := range []struct {
		name  string
		modes map[string]Mode
		want  Mode
		err   string
	}{
		{"enforce by UUID, off by index", map[string]Mode{"GPU-b": ModeEnforce, "1": ModeOff}, ModeOff, "--tuner.gpu-mode=GPU-b=enforce and --tuner.gpu-mode=1=off: off"},
		{"off by UUID, enforce by index", map[string]Mode{"GPU-b": ModeOff, "1": ModeEnforce}, ModeOff, "--tuner.gpu-mode=GPU-b=off and --tuner.gpu-mode=1=enforce: off"},
		{"recommend by UUID, enforce by index", map[string]Mode{"GPU-b": ModeRecommend, "1": ModeEnforce}, ModeRecommend, "--tuner.gpu-mode=GPU-b=recommend and --tuner.gpu-mode=1=enforce: recommend"},
		{"enforce both ways", map[string]Mode{"GPU-b": ModeEnforce, "1": ModeEnforce}, ModeEnforce, ""},
		{"by UUID alone", map[string]Mode{"GPU-b": ModeEnforce, "0": ModeOff}, ModeEnforce, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := &strings.Builder{}
			tu, err := New(Options{Policy: fixed(nil), Actuators: ActuatorsOf(&recorder{}), Clock: gpu.NewManualClock(t0), Mode: ModeRecommend, GPUModes: c.modes,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(out))})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := tu.RunOnce(context.Background(), snapshot(t0, twoGPUs(true), nil)); err != nil {
					t.Fatal(err)
				}
			}
			if m := tu.modeOf("GPU-b", 1); m != c.want {
				t.Errorf("mode %s, want %s", m, c.want)
			}
			if m := tu.Status().ModeOf("GPU-b", 1); m != c.want {
				t.Errorf("status mode %s, want %s", m, c.want)
			}
			n := strings.Count(out.String(), "gives a GPU two modes")
			if c.err == "" && n != 0 || c.err != "" && (n != 1 || !strings.Contains(out.String(), c.err) || !strings.Contains(out.String(), "level=error")) {
				t.Errorf("%d errors, want %q once (none where empty); log:\n%s", n, c.err, out)
			}
		})
	}
}
