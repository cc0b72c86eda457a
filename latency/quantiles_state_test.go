package latency

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// tritonSummary is a Triton exposition whose request summary lists n
// quantiles, i/n for i < n, each i/n seconds (in µs).
func tritonSummary(n int) []byte {
	var b strings.Builder
	b.WriteString("nv_inference_request_success 10\nnv_inference_request_duration_us 1000\n# TYPE nv_inference_request_summary_us summary\n")
	for i := 0; i < n; i++ {
		q := float64(i) / float64(n)
		fmt.Fprintf(&b, "nv_inference_request_summary_us{quantile=\"%g\"} %g\n", q, q*1e6)
	}
	b.WriteString("nv_inference_request_summary_us_sum 1\nnv_inference_request_summary_us_count 1\n")
	return []byte(b.String())
}

func retainedHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A summary may list any number of quantiles; the tracker keeps only
// those a Status reports, and none in its window entries. It kept each
// scrape's whole map in its entry, up to maxWindowEntries of them: a
// 2.7 MB body of 50,000 quantiles scraped 128 times held 150 MB.
func TestTrackerServerQuantilesBounded(t *testing.T) {
	src := &Source{URL: "sim://x", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 8 << 20}
	fams, err := parseExposition(tritonSummary(20000), expfmt.NewFormat(expfmt.TypeTextPlain), families(src))
	if err != nil {
		t.Fatal(err)
	}
	base := retainedHeap()
	tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.95, Target: time.Second}, Window: time.Hour})
	t0 := time.Unix(0, 0)
	const scrapes = 64
	for i := 0; i < scrapes; i++ {
		h, err := extract(src, fams) // a new map each time, as a new scrape's
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.observe(t0.Add(time.Duration(i)*15*time.Second), h); err != nil {
			t.Fatal(err)
		}
	}
	held := int64(retainedHeap()) - int64(base)
	tr.mu.Lock()
	entries, kept := len(tr.deltas), len(tr.prev.serverQuantiles)
	for _, d := range tr.deltas {
		kept += len(d.h.serverQuantiles)
	}
	tr.mu.Unlock()
	t.Logf("%d scrapes, %d window entries: %d quantiles kept, %.1f MB held", scrapes, entries, kept, float64(held)/1e6)
	if entries != scrapes-1 {
		t.Fatalf("%d window entries, want %d", entries, scrapes-1)
	}
	if kept != 4 {
		t.Errorf("%d quantiles kept, want 4 (p50, p90, p99, the objective's p95)", kept)
	}
	if held > 4<<20 && runtime.GOOS == "linux" {
		t.Errorf("tracker holds %d bytes after %d scrapes", held, scrapes)
	}
	st := tr.Status()
	want := map[float64]float64{0.5: 0.5, 0.9: 0.9, 0.95: 0.95, 0.99: 0.99}
	if len(st.Quantiles) != len(want) {
		t.Errorf("quantiles %v, want %v", st.Quantiles, want)
	}
	for q, v := range want {
		if got, ok := st.Quantiles[q]; !ok || !near(got, v) {
			t.Errorf("p%v = %v (present %v), want %v", q*100, got, ok, v)
		}
	}
	runtime.KeepAlive(tr)
}
