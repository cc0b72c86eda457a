package tenant

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("tenants:\n  - name: a\n    selectors: [{kubernetes: {labels: {a: b}}}]\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Add([]byte("tenants: [{name: a, selectors: [{uid: 1}]}]\nmetering: {currency: USD, price_per_gpu_hour: 2.5, price_per_kwh: 0.12}\n"))
	f.Add([]byte("metering: {currency: usd, price_per_kwh: -1}\n"))
	f.Add([]byte("tenants: [{name: a, priority: 99999999999, selectors: [{uid: 1}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("f.yaml", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		names := map[string]bool{}
		for _, tn := range cfg.Tenants {
			if tn.Name == "" || tn.Name == Unassigned || names[tn.Name] || len(tn.Selectors) == 0 {
				t.Fatalf("accepted tenant %+v", tn)
			}
			names[tn.Name] = true
			if s := tn.SLO; s != nil && (s.Quantile <= 0 || s.Quantile >= 1 || s.Target <= 0 || s.Window <= 0) {
				t.Fatalf("accepted slo %+v", s)
			}
			if s := tn.Share; s != nil && s.Min > s.Max {
				t.Fatalf("accepted share %+v", s)
			}
		}
		if p := cfg.Metering; p != nil && p.Problems() != nil {
			t.Fatalf("accepted prices %+v: %v", p, p.Problems())
		}
		// a valid configuration attributes without panicking
		b, err := NewBuilder(cfg, BuilderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = b.Build(sharedReadings(gpu.SharingTimeSlice, 1), gpu.SamplerStats{})
	})
}
