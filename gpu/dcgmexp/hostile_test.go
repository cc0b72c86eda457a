package dcgmexp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// Values that are not finite, or outside what the field can be, are
// refused per series with a warning naming the field; they never reach the
// readings (1e308 MHz scaled to Hz is +Inf).
func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{`DCGM_FI_DEV_SM_CLOCK{UUID="GPU-1"} 1e308`, "DCGM_FI_DEV_SM_CLOCK"},
		{`DCGM_FI_DEV_MEM_CLOCK{UUID="GPU-1"} 1e300`, "DCGM_FI_DEV_MEM_CLOCK"},
		{`DCGM_FI_DEV_FB_USED{UUID="GPU-1"} 1e308`, "DCGM_FI_DEV_FB_USED"},
		{`DCGM_FI_DEV_FB_FREE{UUID="GPU-1"} 1.7e308`, "DCGM_FI_DEV_FB_FREE"},
		{`DCGM_FI_DEV_POWER_USAGE{UUID="GPU-1"} 1e308`, "DCGM_FI_DEV_POWER_USAGE"},
		{`DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1"} 1e9`, "DCGM_FI_DEV_GPU_TEMP"},
		{`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID="GPU-1"} 1e308`, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"},
		{`DCGM_FI_PROF_SM_ACTIVE{UUID="GPU-1"} 1e308`, "DCGM_FI_PROF_SM_ACTIVE"},
		{`DCGM_FI_DEV_GPU_UTIL{UUID="GPU-1"} +Inf`, "DCGM_FI_DEV_GPU_UTIL"},
	} {
		f, warnings, err := Parse(strings.NewReader(tc.line + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if v := f[Key{UUID: "GPU-1", GI: -1}]; v != nil {
			t.Errorf("%s: kept %+v", tc.line, *v)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], tc.want) || !strings.Contains(warnings[0], "GPU-1") {
			t.Errorf("%s: warnings %q, want one naming %s", tc.line, warnings, tc.want)
		}
	}
	// The largest plausible values are kept, and finite once scaled.
	f, warnings, err := Parse(strings.NewReader(`DCGM_FI_DEV_SM_CLOCK{UUID="GPU-1"} 3000
DCGM_FI_DEV_FB_USED{UUID="GPU-1"} 200000
DCGM_FI_DEV_FB_FREE{UUID="GPU-1"} 0
`))
	if v := f[Key{UUID: "GPU-1", GI: -1}]; err != nil || len(warnings) != 0 || v == nil || *v.SMClockHz != 3e9 || *v.FBUsedBytes != 200000<<20 {
		t.Errorf("plausible values: %+v %q %v", f, warnings, err)
	}
}

// A failed scrape's error names the URL once, however it failed.
func TestScrapeErrorNamesURLOnce(t *testing.T) {
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()
	// another host's dcgm-exporter, on another port of this one
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-other"} 0.5`)
	}))
	defer other.Close()
	var bomb bytes.Buffer // 64 MiB of comment lines in about 64 KiB
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	_, _ = zw.Write(bytes.Repeat([]byte("#\n"), 32<<20))
	_ = zw.Close()
	for _, tc := range []struct {
		name, url string
		handler   http.HandlerFunc // nil: url
		want      string
	}{
		{"connection refused", refused.URL + "/metrics", nil, "connect"},
		{"timeout", "", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "deadline"},
		{"status", "", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "", http.StatusServiceUnavailable) }, "HTTP 503"},
		// a redirect is followed to the same scheme, host and port only,
		// five times at most
		{"redirect elsewhere", "", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/metrics", http.StatusFound)
		}, "refused a redirect to another scheme, host or port (" + other.URL + ")"},
		{"gzip bomb", "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb.Bytes())
		}, "page larger than 16777216 bytes"},
		{"closed mid-body", "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte(`DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-1"} 0.5` + "\n"))
		}, "unexpected EOF"},
		{"1 MB label", "", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",pod="` + strings.Repeat("p", 1<<20) + `"} 50` + "\n"))
		}, "line 1: DCGM_FI_DEV_GPU_TEMP: longer than 65536 bytes"},
		{"redirect loop", "", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, r.URL.Path, http.StatusFound) }, "stopped after 5 redirects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url
			if tc.handler != nil {
				srv := httptest.NewServer(tc.handler)
				defer srv.Close()
				u = srv.URL + "/metrics"
			}
			// the scrape's own timeout only where it is the case; the
			// others end on their own (a gzip bomb's 16 MiB decompressed
			// and parsed first took over 10 s under -race on a loaded
			// machine, a 1 MB label over 50 ms)
			timeout := time.Minute
			if tc.name == "timeout" {
				timeout = 50 * time.Millisecond
			}
			s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: u, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.scrape(context.Background())
			if err == nil || strings.Count(err.Error(), u) != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: want %q and the URL once", err, tc.want)
			}
			if tc.name == "timeout" && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("timeout %v is not context.DeadlineExceeded", err)
			}
		})
	}
}

// A ratio above 1 by rounding is clamped to 1; one further above is a
// broken field: skipped, with a warning naming the field, the GPU and the
// URL, never served as a saturated 1.
func TestRatioAboveOne(t *testing.T) {
	for _, tc := range []struct {
		line string
		want float64 // -1: skipped
	}{
		{`DCGM_FI_PROF_DRAM_ACTIVE{UUID="` + uuidA + `"} 1.0000001`, 1},
		{`DCGM_FI_PROF_DRAM_ACTIVE{UUID="` + uuidA + `"} 1.05`, 1},
		{`DCGM_FI_PROF_DRAM_ACTIVE{UUID="` + uuidA + `"} 1.2`, -1},
		{`DCGM_FI_PROF_DRAM_ACTIVE{UUID="` + uuidA + `"} 5.0`, -1},
		{`DCGM_FI_PROF_DRAM_ACTIVE{UUID="` + uuidA + `"} 9.99`, -1},
		{`DCGM_FI_DEV_GPU_UTIL{UUID="` + uuidA + `"} 100.4`, 1},
		{`DCGM_FI_DEV_GPU_UTIL{UUID="` + uuidA + `"} 500`, -1},
	} {
		t.Run(tc.line, func(t *testing.T) {
			srv := serve(t, []byte(tc.line+"\n"), nil)
			var logs bytes.Buffer
			s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL + "/metrics", Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			rd, err := s.Sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			a := rd.Devices[0]
			got := val(a.Activity.DRAMActive)
			if strings.HasPrefix(tc.line, "DCGM_FI_DEV_GPU_UTIL") {
				got = val(a.GPUUtil)
			}
			if got != tc.want {
				t.Errorf("reading %v, want %v", got, tc.want)
			}
			field := tc.line[:strings.IndexByte(tc.line, '{')]
			warned := strings.Contains(logs.String(), "series skipped")
			if warned != (tc.want < 0) {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tc.want < 0, logs.String())
			}
			if warned && (!strings.Contains(logs.String(), field) || !strings.Contains(logs.String(), uuidA) || !strings.Contains(logs.String(), "url="+srv.URL)) {
				t.Errorf("warning does not name %s, the GPU and the URL:\n%s", field, logs.String())
			}
		})
	}
}

// A failure whose message differs on every scrape warns once, then at most
// once a minute; the recovery is always logged.
func TestFailureWarningRateLimited(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "", 500+int(n.Add(1)%10))
	}))
	defer srv.Close()
	var logs bytes.Buffer
	clock := gpu.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL, Logger: log.NewLogfmtLogger(&logs), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for range 40 { // 40 samples 15 s apart: 10 minutes
		if _, err := s.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(15 * time.Second)
	}
	if got := strings.Count(logs.String(), "scraping dcgm-exporter failed"); got < 1 || got > 11 {
		t.Errorf("%d warnings in 10 minutes of failures, want 1 and at most one a minute:\n%s", got, logs.String())
	}
	if s.ScrapeErrorsTotal() != 40 {
		t.Errorf("%d errors counted, want 40", s.ScrapeErrorsTotal())
	}
}

// bigPage is a dcgm-exporter page of about 15 MiB and 200k series: 8 GPUs
// in Kubernetes mode, each field repeated per pod, among families the
// source does not read.
func bigPage() []byte {
	var b bytes.Buffer
	fams := []string{"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
		"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_XID_ERRORS",
		"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"}
	for _, name := range fams {
		fmt.Fprintf(&b, "# HELP %s help text\n# TYPE %s gauge\n", name, name)
		for j := range 20000 {
			fmt.Fprintf(&b, "%s{gpu=\"%d\",UUID=\"GPU-%08d\",pod=\"p-%d\"} %d\n", name, j%8, j%8, j, 100+j%7)
		}
	}
	return b.Bytes()
}

func BenchmarkParseBigPage(b *testing.B) {
	page := bigPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		f, _, err := Parse(bytes.NewReader(page))
		if err != nil || len(f) != 8 {
			b.Fatalf("%d keys, %v", len(f), err)
		}
	}
}

// The whole scrape, parsing included, is bounded by the timeout.
func TestScrapeTimeoutCoversParse(t *testing.T) {
	page := bigPage()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(page)
	}))
	defer srv.Close()
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: srv.URL, Timeout: time.Second, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.scrape(context.Background())
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("scrape of a %d-byte page under a 1s timeout took %v (error %v)", len(page), took, err)
	}
}

// The parse itself stops when its context ends, within 4096 lines, and says
// where and why: a page delivered in full before the timeout is not parsed
// to its end after it. (The scrape's test above cannot show this on every
// machine: the page parses within its timeout on a fast one.)
func TestParseStopsWhenContextEnds(t *testing.T) {
	page := bigPage()
	cause := errors.New("the scrape's timeout")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	f, _, err := ParseFormat(ctx, bytes.NewReader(page), FormatText)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "stopped at line 4096") || f != nil {
		t.Fatalf("parse of %d bytes under an ended context: %d fields, error %v; want it stopped at line 4096 by the cause", len(page), len(f), err)
	}
}

// A failed scrape's error names the status code, not the reason phrase:
// that is dcgm-exporter's own text, up to the HTTP client's header limit
// (headercap.MaxBytes), and went whole into the warning logged.
func TestScrapeStatusReasonNotQuoted(t *testing.T) {
	s, err := New(&fakeSource{rd: innerReadings()}, Options{URL: testutil.LongReasonServer(t, 503, 32<<10) + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.scrape(context.Background())
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || len(err.Error()) > 512 {
		t.Errorf("error of %d bytes: %.200v, want one naming HTTP 503, without the reason phrase", len(fmt.Sprint(err)), err)
	}
}

// A page naming a great many GPUs (here 16 MiB, 455,000 distinct UUIDs:
// a broken exporter, or one that is not dcgm-exporter) keeps the fields
// of the first maxKeys GPUs and MIG instances and skips the rest with a
// warning, instead of holding every one: memory no longer grows with the
// page (51 MiB held for the 16 MiB page before, 168 MiB allocated).
func TestParseManyGPUsBounded(t *testing.T) {
	var b bytes.Buffer
	for i := 0; b.Len() < 16<<20; i++ {
		fmt.Fprintf(&b, "DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-%x\"} 1\n", i)
	}
	page := b.Bytes()
	var f Fields
	var warnings []string
	var err error
	alloc := testutil.Allocated(func() { f, warnings, err = Parse(bytes.NewReader(page)) })
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != maxKeys || f[Key{UUID: "GPU-0", GI: -1}] == nil {
		t.Errorf("%d GPUs and instances kept, want the first %d", len(f), maxKeys)
	}
	if len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), "more than") {
		t.Errorf("warnings %q, want one saying the page names more GPUs than kept", warnings)
	}
	t.Logf("%d MiB page: %d MiB allocated", len(page)>>20, alloc>>20)
	if alloc > 64<<20 {
		t.Errorf("allocated %d MiB parsing a %d MiB page", alloc>>20, len(page)>>20)
	}
}

// A line over 64 KiB of another family (a pod label of 1 MB) or a
// comment is skipped, and the page's fields are read: it made the whole
// page invalid, every GPU without DCGM fields. One of a field the parser
// reads is still an error naming the line and the field.
func TestLongLineOfAnotherFamilySkipped(t *testing.T) {
	long := strings.Repeat("p", 1<<20)
	page := "# HELP DCGM_FI_DEV_GPU_TEMP " + long + "\n" +
		`DCGM_FI_DEV_XID_ERRORS{UUID="GPU-1",pod="` + long + `"} 0` + "\r\n" +
		`DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1"} 50` + "\r\n" +
		"other_family " + long
	f, warnings, err := Parse(strings.NewReader(page))
	if v := f[Key{UUID: "GPU-1", GI: -1}]; err != nil || len(warnings) != 0 || v == nil || v.TemperatureC == nil || *v.TemperatureC != 50 {
		t.Fatalf("fields %+v, warnings %q, error %v; want the temperature read", f, warnings, err)
	}
	_, _, err = Parse(strings.NewReader("# ok\n" + `DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",pod="` + long + `"} 50` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: DCGM_FI_DEV_GPU_TEMP: longer than 65536 bytes") {
		t.Errorf("error %v, want one naming line 2 and its field", err)
	}
}

// A metric name followed by a carriage return is another metric's, which
// the parser does not read, on a line of any length: one over 64 KiB was
// refused as a line of the field too long, failing the page, where the
// same line short was skipped.
func TestCarriageReturnAfterNameSkipped(t *testing.T) {
	long := strings.Repeat("p", 1<<17)
	for _, l := range []string{"DCGM_FI_DEV_GPU_TEMP\r{UUID=\"GPU-1\"} 7", "DCGM_FI_DEV_GPU_TEMP\r{UUID=\"GPU-1\",pod=\"" + long + "\"} 7"} {
		page := l + "\n" + `DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1"} 50` + "\n"
		f, _, err := Parse(strings.NewReader(page))
		if v := f[Key{UUID: "GPU-1", GI: -1}]; err != nil || v == nil || v.TemperatureC == nil || *v.TemperatureC != 50 {
			t.Errorf("a line of %d bytes: fields %+v, error %v; want it skipped and the temperature read", len(l), v, err)
		}
	}
}

// A line of exactly 64 KiB, ended by a newline or a carriage return and
// one, is read; one byte more is over the limit. A line of 64 KiB was
// refused as "longer than 65536 bytes", and one of 64 KiB less a byte
// read ended by "\n" but refused ended by "\r\n".
func TestLineAtTheLimit(t *testing.T) {
	line := func(n int) string {
		pre, suf := `DCGM_FI_DEV_GPU_TEMP{UUID="GPU-1",pod="`, `"} 50`
		return pre + strings.Repeat("p", n-len(pre)-len(suf)) + suf
	}
	for _, tc := range []struct {
		n   int
		end string
		ok  bool
	}{
		{maxLine - 1, "\n", true}, {maxLine - 1, "\r\n", true},
		{maxLine, "\n", true}, {maxLine, "\r\n", true}, {maxLine, "", true},
		{maxLine + 1, "\n", false}, {maxLine + 1, "\r\n", false}, {maxLine + 1, "", false},
		{maxLine + 2, "", false},
	} {
		page := line(tc.n) + tc.end
		if tc.end != "" {
			page += `DCGM_FI_DEV_POWER_USAGE{UUID="GPU-1"} 7` + "\n"
		}
		for _, r := range []io.Reader{strings.NewReader(page), iotest.OneByteReader(strings.NewReader(page))} {
			f, _, err := Parse(r)
			v := f[Key{UUID: "GPU-1", GI: -1}]
			switch {
			case tc.ok && (err != nil || v == nil || v.TemperatureC == nil || (tc.end != "" && v.PowerWatts == nil)):
				t.Errorf("a line of %d bytes ended by %q: fields %+v, error %v; want it read", tc.n, tc.end, v, err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "line 1: DCGM_FI_DEV_GPU_TEMP: longer than 65536 bytes")):
				t.Errorf("a line of %d bytes ended by %q: error %v; want it over the limit", tc.n, tc.end, err)
			}
		}
	}
}
