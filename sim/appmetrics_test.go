package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// AppMetricFamilies gives the families the text parser reads back from
// AppMetrics, for every kind of workload, with and without a model name.
func TestAppMetricFamiliesMatchText(t *testing.T) {
	sc := mustParse(t, `name: fams
gpus: [{model: H100-SXM5-80GB}]
tenants:
  - {name: chat, memory: 20GiB, slo: {quantile: 0.99, target: 2s}, workload: {type: llm, model_name: "llama \"3\"", params: 1e9, arrival: {process: poisson, rate: 20}}}
  - {name: vision, memory: 4GiB, workload: {type: dnn, flops: 1e10, arrival: {process: poisson, rate: 200}}}
  - {name: train, memory: 8GiB, workload: {type: training, flops: 1e13}}
`)
	s := mustNew(t, sc, Options{})
	s.AdvanceTo(s.Now().Add(5 * time.Second))
	text := func(fams map[string]*dto.MetricFamily) string {
		var b strings.Builder
		for _, name := range []string{appRunning, appWaiting, appE2E, appTTFT, appITL, appPrompt, appGen} {
			if mf := fams[name]; mf != nil {
				if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
					t.Fatal(err)
				}
				for _, m := range mf.GetMetric() {
					if h := m.GetHistogram(); h != nil {
						b.WriteString(strings.Repeat("+", len(h.GetBucket()))) // bucket lists alike, +Inf too
					}
				}
			}
		}
		return b.String()
	}
	for _, app := range []string{"chat", "vision", "train"} {
		var buf bytes.Buffer
		if err := s.AppMetrics(app, &buf); err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		parsed, err := p.TextToMetricFamilies(&buf)
		if err != nil {
			t.Fatal(err)
		}
		typed, err := s.AppMetricFamilies(app)
		if err != nil {
			t.Fatal(err)
		}
		if len(typed) != len(parsed) {
			t.Errorf("%s: %d families, the text has %d", app, len(typed), len(parsed))
		}
		if got, want := text(typed), text(parsed); got != want {
			t.Errorf("%s: families differ from the text's:\n--- typed\n%s\n--- parsed\n%s", app, got, want)
		}
		if fams := parsed[appE2E]; fams == nil || fams.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("%s: no requests completed", app)
		}
	}
	if _, err := s.AppMetricFamilies("nobody"); err == nil {
		t.Error("unknown app: no error")
	}
}
