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
