package collector_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/simtest"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestGPUInfoStableFromFirstSample: vgpu_gpu_info is one series per GPU
// from the first sample on, its activity_source named there already
// (that sample has no ratio yet, the next has): a scrape right after the
// start leaves no second identity series of the GPU to go stale.
func TestGPUInfoStableFromFirstSample(t *testing.T) {
	for _, name := range []string{"h100-timeslice", "h200-mig"} {
		t.Run(name, func(t *testing.T) {
			h := simtest.New(t, "../scenarios/"+name+".yaml", "../scenarios/"+name+".tenants.yaml")
			var store tenant.Store
			reg := register(t, &store, "gpu")
			ctx := context.Background()
			info := func(r *gpu.Readings) string {
				h.Builder.Refresh(ctx)
				store.Store(h.Builder.Build(r, gpu.SamplerStats{}))
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				for _, mf := range mfs {
					if mf.GetName() == "vgpu_gpu_info" {
						if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
							t.Fatal(err)
						}
					}
				}
				return b.String()
			}
			first := info(h.Sample(ctx, 0))
			if !strings.Contains(first, `activity_source="sim"`) {
				t.Errorf("first sample's vgpu_gpu_info:\n%s\nwant activity_source=\"sim\"", first)
			}
			second := h.Sample(ctx, time.Second)
			if second.Devices[0].Activity.SMActive == nil {
				t.Fatal("no ratio on the second sample")
			}
			info(second)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(first), "vgpu_gpu_info"); err != nil {
				t.Errorf("vgpu_gpu_info changed from the first sample to the second:\n%v", err)
			}
		})
	}
}
