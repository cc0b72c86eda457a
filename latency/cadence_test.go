package latency

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// slowApp serves a body, each scrape a slow pass.
type slowApp struct {
	*gpu.SlowPasses
	body []byte
}

func (a slowApp) AppMetrics(_ string, w io.Writer) error {
	a.Pass()
	_, err := w.Write(a.body)
	return err
}

// A source is scraped every scrape interval, whatever a scrape takes (a
// slow tenant, up to its timeout): one that takes part of the interval
// does not push the next ones later, and one that takes longer than the
// interval is followed at the next whole interval from its start.
func TestPoolKeepsItsCadence(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		took time.Duration
		want []time.Duration
	}{
		{0, []time.Duration{0, 15 * s, 30 * s, 45 * s}},
		{5 * s, []time.Duration{0, 15 * s, 30 * s, 45 * s}},
		{20 * s, []time.Duration{0, 30 * s, 60 * s}},
	} {
		testutil.CheckCadence(t, "scrapes", time.Unix(0, 0), s, tc.took, tc.want, func(ctx context.Context, passes *gpu.SlowPasses) func() {
			p := NewPool(Options{Clock: passes.Clock, AppMetrics: slowApp{passes, fixture(t, "vllm-1.txt")}})
			p.Set([]Spec{{Name: "a", Key: "a", Source: &Source{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Minute, MaxBytes: 1 << 20}, Window: time.Minute}}, 15*s)
			p.Start(ctx)
			return p.Wait
		})
	}
}
