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
