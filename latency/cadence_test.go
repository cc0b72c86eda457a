package latency

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
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
		clk := gpu.NewManualClock(time.Unix(0, 0))
		app := slowApp{&gpu.SlowPasses{Clock: clk, Took: tc.took}, fixture(t, "vllm-1.txt")}
		p := NewPool(Options{Clock: clk, AppMetrics: app})
		p.Set([]Spec{{Name: "a", Key: "a", Source: &Source{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Minute, MaxBytes: 1 << 20}, Window: time.Minute}}, 15*s)
		ctx, cancel := context.WithCancel(context.Background())
		p.Start(ctx)
		err := clk.Drive(s, func() bool { return len(app.Starts()) >= len(tc.want) }, 10*time.Second)
		cancel()
		p.Wait()
		if err != nil {
			t.Fatal("the pool never parked: ", err)
		}
		if got := app.Starts(); !slices.Equal(got, tc.want) {
			t.Errorf("scrapes of %v started at %v, want %v", tc.took, got, tc.want)
		}
	}
}
