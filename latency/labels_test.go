package latency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// labelsLine is a bucket line of the vLLM family with n labels, le
// included.
func labelsLine(n int, le string) string {
	var b strings.Builder
	b.WriteString("vllm:e2e_request_latency_seconds_bucket{")
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&b, "l%d=\"\",", i)
	}
	fmt.Fprintf(&b, "le=%q} 1\n", le)
	return b.String()
}

// A text line with a great many labels is refused at once, naming the
// line and the series: the text parser checks a line's label names for
// duplicates anew after each label, so 16,000 labels (150 KB) took it
// 22 s, and a 4 MiB line would take hours.
func TestTextManyLabelsRefused(t *testing.T) {
	body := "# TYPE vllm:e2e_request_latency_seconds histogram\n" + labelsLine(16000, "+Inf")
	src := &Source{Preset: PresetVLLME2E}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := parseExposition([]byte(body), expfmt.NewFormat(expfmt.TypeTextPlain), families(src))
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("a %d-byte line of 16,000 labels still parsing after 10 s", len(body))
	}
	if !errors.Is(err, errTooManyLabels) || !strings.Contains(err.Error(), "line 2: series vllm:e2e_request_latency_seconds_bucket has more than") {
		t.Fatalf("err %v, want the line and series refused for too many labels", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing it took %v", d)
	}

	// Through a scrape, the error names the source.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	src = &Source{URL: srv.URL, Preset: PresetVLLME2E, Timeout: 10 * time.Second, MaxBytes: 1 << 20}
	_, err = (&scraper{httpc: srv.Client()}).fetch(context.Background(), src)
	if !errors.Is(err, errTooManyLabels) || !strings.HasPrefix(err.Error(), srv.URL+": parse: line 2: ") {
		t.Fatalf("fetch: err %v", err)
	}
}

// Series at the limit parse; an '=' or an escaped quote inside a label
// value is no label; the count starts again at each line, also one read
// in pieces.
func TestTextLabelsAtLimit(t *testing.T) {
	quoted := `vllm:e2e_request_latency_seconds_bucket{model_name="a=b,\"c=d\\\",x=\"y",le="0.1"} 1` + "\n"
	body := "# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"# HELP vllm:e2e_request_latency_seconds " + strings.Repeat(`a="b",`, 100) + "\n" +
		labelsLine(maxLabels, "0.5") + labelsLine(maxLabels, "+Inf") + quoted +
		strings.Repeat(`vllm:e2e_request_latency_seconds_bucket{model_name="`+strings.Repeat("=", 70<<10)+`",le="+Inf"} 1`+"\n", 2) +
		"vllm:e2e_request_latency_seconds_count 1\nvllm:e2e_request_latency_seconds_sum 1\n" +
		strings.Repeat(`other{`+strings.Repeat(`a="b",`, 100)+`} 1`+"\n", 3)
	fams, err := parseExposition([]byte(body), expfmt.NewFormat(expfmt.TypeTextPlain), families(&Source{Preset: PresetVLLME2E}))
	if err != nil {
		t.Fatal(err)
	}
	mf := fams["vllm:e2e_request_latency_seconds"]
	if n := len(mf.GetMetric()); n != 4 {
		t.Fatalf("%d series, want 4", n)
	}
	if got := mf.GetMetric()[1].GetLabel()[0].GetValue(); got != `a=b,"c=d\",x="y` {
		t.Errorf("quoted label value %q", got)
	}

	over := "# TYPE vllm:e2e_request_latency_seconds histogram\n" + labelsLine(maxLabels+1, "+Inf")
	if _, err := parseExposition([]byte(over), expfmt.NewFormat(expfmt.TypeTextPlain), families(&Source{Preset: PresetVLLME2E})); !errors.Is(err, errTooManyLabels) {
		t.Fatalf("%d labels: err %v, want refused", maxLabels+1, err)
	}
}

// A parse error in the source's families names the line of the body, not
// of the lines the family filter passed on to the parser.
func TestTextParseErrorNamesBodyLine(t *testing.T) {
	others := func(n int) string { // n other families, three lines each, and a comment
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "# TYPE other_%d gauge\nother_%d{a=\"b\"} 1\n\n# a comment\n", i, i)
		}
		return b.String()
	}
	head := "# TYPE vllm:e2e_request_latency_seconds histogram\n"
	bucket := "vllm:e2e_request_latency_seconds_bucket{le=\"0.1\"} 1\n"
	tests := []struct{ name, before, bad, after string }{
		{"an exemplar", others(10) + head + others(3) + bucket,
			"vllm:e2e_request_latency_seconds_bucket{le=\"1\"} 3 # {trace_id=\"x\"} 0.5 1.0\n", others(2)},
		{"a second TYPE line", head + bucket + others(7), head, bucket},
		{"a bad value", others(4) + head + bucket + others(1), "vllm:e2e_request_latency_seconds_count x\n", ""},
		{"the last line without its newline", others(9) + head + bucket + others(1), "vllm:e2e_request_latency_seconds_sum 1 2 3", ""},
		{"CRLF lines", strings.ReplaceAll(others(6)+head+bucket, "\n", "\r\n"), "vllm:e2e_request_latency_seconds_sum 1 y\r\n", "\r\n"},
	}
	names := families(&Source{Preset: PresetVLLME2E})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.before + tc.bad + tc.after
			_, err := parseExposition([]byte(body), expfmt.NewFormat(expfmt.TypeTextPlain), names)
			want := fmt.Sprintf("line %d:", strings.Count(tc.before, "\n")+1)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one naming %s", err, want)
			}
		})
	}
}
