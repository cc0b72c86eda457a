package latency

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

func FuzzLatencyExposition(f *testing.F) {
	files, _ := filepath.Glob("testdata/latency/*.txt")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, b)
		}
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		srcs := []*Source{
			{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetVLLME2E, Matchers: map[string]string{"model_name": "llama"}, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTGI, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20},
		}
		for _, src := range srcs {
			tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.99, Target: 300 * time.Millisecond}, Window: time.Minute})
			for i, data := range [][]byte{first, second} {
				fams, err := parseExposition(data, expfmt.FmtText)
				if err != nil {
					continue
				}
				h, err := extract(src, fams)
				if err != nil {
					continue
				}
				for j := range h.bounds {
					if math.IsNaN(h.cum[j]) || (j > 0 && (h.bounds[j] <= h.bounds[j-1] || h.cum[j] < h.cum[j-1])) || h.cum[j] > h.count {
						t.Fatalf("bad histogram %+v", h)
					}
				}
				tr.observe(time.Unix(int64(15*i), 0), h)
			}
			st := tr.Status()
			if st.RequestsTotal < 0 || st.GoodRequestsTotal < 0 || st.GoodRequestsTotal > st.RequestsTotal+1e-6*math.Max(1, st.RequestsTotal) {
				t.Fatalf("counters %+v", st)
			}
			if a := st.Attainment; a != nil && (math.IsNaN(*a) || *a < 0 || *a > 1) {
				t.Fatalf("attainment %v", *a)
			}
			for q, v := range st.Quantiles {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("quantile %v = %v", q, v)
				}
			}
		}
	})
}
