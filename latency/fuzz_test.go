package latency

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

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
	// the metric named inside the braces, quoted, the labels in another order
	quoted := "{\"vllm:e2e_request_latency_seconds_bucket\",le=\"1\",model_name=\"llama\"} 9\n{model_name=\"llama\",\"vllm:e2e_request_latency_seconds_count\"} 9\n" +
		"{\"vllm:e2e_request_latency_seconds_sum\",\"model_name\"=\"llama\"} 1\n{\"vllm:e2e_request_latency_seconds_count\",model_name=\"other\"} 5\n{\"gpu.temp\"} 1\n"
	f.Add([]byte(quoted), []byte(strings.ReplaceAll(quoted, "9", "19")))
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
				// decoded as a scrape does, the matchers' series alone: the same
				picked, err := decodeExposition(bytes.NewReader(data), int64(len(data)), expfmt.FmtText, families(src), src.Matchers)
				if err != nil {
					t.Fatalf("the matching series refused, the whole page read: %v", err)
				}
				if hp, err := extract(src, picked); err != nil || !reflect.DeepEqual(hp, h) {
					t.Fatalf("the matching series read %+v, %v; the whole page %+v", hp, err, h)
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
			if m := st.MeanSeconds; m != nil && !(*m >= 0 && !math.IsInf(*m, 0)) {
				t.Fatalf("mean latency %v s", *m)
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

// FuzzRetryAfter: whatever a source's Retry-After holds, the wait is
// between 0 and maxRetryAfter, a value that is not delta-seconds or an
// HTTP date is an error and no wait, and the scrape's error stays short,
// printable and says what was made of the header.
func FuzzRetryAfter(f *testing.F) {
	for _, v := range []string{"120", "0", "", "-5", "1e12", "1000000000000", "99999999999999999999999999",
		"Sun, 06 Dec 2026 09:01:00 GMT", "Sunday, 06-Dec-26 09:01:30 GMT", "Sun Dec  6 09:01:00 2026",
		"Fri, 01 Jan 2100 00:00:00 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", " 5", "5\x00", "\xff\xfe"} {
		f.Add(v)
	}
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		wait, capped, err := retryAfterWait(v, now)
		if wait < 0 || wait > maxRetryAfter || (capped && wait != maxRetryAfter) || (err != nil && (wait != 0 || capped)) {
			t.Fatalf("Retry-After %q: wait %v capped %v err %v", v, wait, capped, err)
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil && n <= 600 && !strings.HasPrefix(v, "+") && wait != time.Duration(n)*time.Second {
			t.Fatalf("Retry-After %q: wait %v, want %d s", v, wait, n)
		}
		until, serr := backoff(&statusError{url: "http://x", code: 429, retryAfter: v}, now)
		msg := serr.Error()
		if !until.IsZero() && (until.Sub(now) != wait || wait == 0) {
			t.Fatalf("Retry-After %q: until %v, wait %v", v, until, wait)
		}
		if len(msg) > 2*maxQuoted+200 || !utf8.ValidString(msg) || strings.ContainsFunc(msg, unicode.IsControl) {
			t.Fatalf("Retry-After %q: error %q", v, msg)
		}
		if v != "" && (err != nil) != strings.HasSuffix(msg, ": ignored") {
			t.Fatalf("Retry-After %q: error %q, parse error %v", v, msg, err)
		}
	})
}
