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
		// a valid configuration attributes without panicking
		b, err := NewBuilder(cfg, BuilderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = b.Build(sharedReadings(gpu.SharingTimeSlice, 1), gpu.SamplerStats{})
	})
}
