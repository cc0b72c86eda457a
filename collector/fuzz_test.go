package collector

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// FuzzScrape feeds snapshots whose strings, IDs and quantiles come from
// outside (device names, tenants file, MIG profiles, latency sources) and
// may collide or be malformed. Whatever they hold, a scrape must succeed as
// a whole (no duplicate series reach the registry), no collector may panic,
// every collector must report its success metric, and Text must render
// the bytes the registry's families encode to.
func FuzzScrape(f *testing.F) {
	f.Add("NVIDIA H200", "GPU-a", "GPU-b", "chat", "train", "3g.71gb", 1, 2, 0.99, uint64(79))
	f.Add("x", "GPU-a", "GPU-a", "t", "t", "", 1, 1, 0.5, uint64(0))
	f.Add("bad\xff", "", "", "", "unassigned", "\x00", -1, -1, -0.5, uint64(1<<63))
	f.Fuzz(func(t *testing.T, name, uuid1, uuid2, tenant1, tenant2, profile string, gi1, gi2 int, q float64, code uint64) {
		dev := func(idx int, uuid string, gi int) gpu.Device {
			d := migDevice()
			d.Index, d.UUID, d.Name = idx, uuid, name
			d.MIG[0].GPUInstanceID, d.MIG[0].Profile = gi, profile
			d.MIG[1].GPUInstanceID = gi2
			v := vgpuDevice()
			d.VGPUs, d.Scheduler = v.VGPUs, v.Scheduler
			d.VGPUs[1].ID = uint32(gi)
			d.VGPUs[1].VMName = tenant2
			return d
		}
		s := richSnapshot()
		s.Readings = readings(dev(0, uuid1, gi1), dev(1, uuid2, gi2), dev(0, uuid1, gi2))
		s.Tenants = []tenant.Info{{Name: tenant1, Class: gpu.TenantClass(profile)}, {Name: tenant2}}
		for i := range s.Usage {
			s.Usage[i].UUID = uuid1
			s.Usage[i].GPUInstance = profile
			s.Usage[i].Tenant = tenant1
		}
		s.SLOs[0].Tenant = tenant1
		s.SLOs[0].Quantile = q
		s.SLOs[0].Quantiles = map[float64]float64{q: 1, 0.5: q, 0.99: 2}
		s.SLOs[1].Tenant = tenant2
		s.Events = []tenant.EventCount{
			{GPU: 0, UUID: uuid1, Kind: gpu.EventKind(profile), Code: code, Total: 1},
			{GPU: 0, UUID: uuid1, Kind: gpu.EventKind(profile), Code: code, Total: 2},
			{GPU: 1, UUID: uuid2, Kind: gpu.EventXID, Code: code, Total: 3},
		}

		var logged strings.Builder
		e, err := NewExporter(static(s), log.NewLogfmtLogger(log.NewSyncWriter(&logged)), builtin...)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(e)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("scrape failed as a whole: %v", err)
		}
		if strings.Contains(logged.String(), "panic") {
			t.Fatalf("a collector panicked:\n%s", logged.String())
		}
		reported := map[string]bool{}
		for _, mf := range mfs {
			if mf.GetName() != "vgpu_scrape_collector_success" {
				continue
			}
			for _, m := range mf.GetMetric() {
				reported[m.GetLabel()[0].GetValue()] = true
			}
		}
		for _, c := range builtin {
			if !reported[c] {
				t.Errorf("no vgpu_scrape_collector_success for %s", c)
			}
		}
		// Text renders the same bytes as the registry and the encoder, the
		// second time from the series kept the first.
		text := NewText(e)
		for range 2 {
			var buf bytes.Buffer
			if err := text.Render(&buf, nil); err != nil {
				t.Fatalf("Text: %v", err)
			}
			got := durations.ReplaceAll(buf.Bytes(), []byte("$1 D"))
			if want := durations.ReplaceAll(format(t, reg), []byte("$1 D")); !bytes.Equal(got, want) {
				t.Fatalf("Text renders\n%s\nthe registry and encoder\n%s", got, want)
			}
		}
	})
}
