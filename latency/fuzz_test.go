package latency

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protowire"
)

func FuzzLatencyExposition(f *testing.F) {
	files, _ := filepath.Glob("testdata/latency/*.txt")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, b)
		}
	}
	// a bucket bounded by -Inf in both scrapes: NaN quantiles and a
	// NaN good-requests counter before it was refused
	negInf := func(n string) []byte {
		return []byte("# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{le=\"-Inf\"} 0\n" +
			"vllm:e2e_request_latency_seconds_bucket{le=\"1\"} " + n + "\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} " + n + "\n" +
			"vllm:e2e_request_latency_seconds_sum 1\nvllm:e2e_request_latency_seconds_count " + n + "\n")
	}
	f.Add(negInf("9"), negInf("19"))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		srcs := []*Source{
			{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetVLLME2E, Matchers: map[string]string{"model_name": "llama"}, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetSGLangITL, Matchers: map[string]string{"model_name": "meta-llama/Llama-3.1-8B-Instruct"}, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTGI, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTriton, Matchers: map[string]string{"model": "bert"}, Timeout: time.Second, MaxBytes: 1 << 20},
		}
		for _, src := range srcs {
			tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.99, Target: 300 * time.Millisecond}, Window: time.Minute})
			for i, data := range [][]byte{first, second} {
				fams, err := parseExposition(data, expfmt.FmtText, families(src))
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
				_ = tr.observe(time.Unix(int64(15*i), 0), h) // refusals are fine; the status is checked below
			}
			st := tr.Status()
			if !(st.RequestsTotal >= 0) || !(st.GoodRequestsTotal >= 0) || st.GoodRequestsTotal > st.RequestsTotal+1e-6*math.Max(1, st.RequestsTotal) {
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

// FuzzLatencyProtobuf feeds delimited-protobuf bodies (seeded with the
// fixtures re-encoded, and with length prefixes that claim far more than
// the body holds) through the decoder, with and without the family filter:
// no body may panic, and one that decodes stays within the limits.
func FuzzLatencyProtobuf(f *testing.F) {
	files, _ := filepath.Glob("testdata/latency/*.txt")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(protoBody(f, b))
		}
	}
	for _, claim := range []uint64{1 << 40, 1 << 50, 3 << 30, 1<<64 - 1} {
		f.Add(protowire.AppendVarint(nil, claim))
	}
	f.Add([]byte{0x05, 0x0a, 0x03, 'a', 'b'}) // truncated
	f.Fuzz(func(t *testing.T, body []byte) {
		src := &Source{URL: "http://x", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
		for _, names := range [][]string{nil, families(src)} {
			fams, err := parseExposition(body, protoFormat, names)
			if err != nil {
				continue
			}
			n := 0
			for _, mf := range fams {
				n += len(mf.GetMetric())
			}
			if n > maxElements {
				t.Fatalf("%d series decoded, over the %d limit", n, maxElements)
			}
			h, err := extract(src, fams)
			if err != nil {
				continue
			}
			tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.99, Target: 300 * time.Millisecond}, Window: time.Minute})
			_ = tr.observe(time.Unix(0, 0), h)
			_ = tr.observe(time.Unix(15, 0), h)
			if st := tr.Status(); st.RequestsTotal != 0 {
				t.Fatalf("the same histogram twice counted %v requests", st.RequestsTotal)
			}
		}
	})
}
