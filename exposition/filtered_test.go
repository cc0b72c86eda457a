package exposition

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// namedCollector serves vgpu_fake_ratio{collector=<name>} for each name.
type namedCollector []string

func (c namedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fakeDesc }
func (c namedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c {
		ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, n)
	}
}

func TestMetrics(t *testing.T) {
	cached := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("cached\n")) })
	newCollector := func(filters ...string) (prometheus.Collector, error) {
		for _, f := range filters {
			if f == "bogus" {
				return nil, errors.New(`unknown collector "bogus"`)
			}
		}
		return namedCollector(filters), nil
	}
	self := prometheus.NewRegistry()
	self.MustRegister(collectors.NewBuildInfoCollector())
	for _, tc := range []struct {
		name   string
		target string
		self   prometheus.Gatherer
		code   int
		has    []string
		hasNot []string
	}{
		{"no filter: the cache", "/metrics", self, 200, []string{"cached"}, []string{"vgpu_fake_ratio"}},
		{"collect[]", "/metrics?collect[]=gpu&collect[]=tenant", self, 200,
			[]string{`vgpu_fake_ratio{collector="gpu"} 1`, `vgpu_fake_ratio{collector="tenant"} 1`, "go_build_info"}, []string{"cached"}},
		{"collect[] without the exporter's own", "/metrics?collect[]=gpu", nil, 200, []string{`vgpu_fake_ratio{collector="gpu"} 1`}, []string{"go_build_info"}},
		{"name[] alone: rendered", "/metrics?name[]=vgpu_fake_ratio", nil, 200, nil, []string{"cached"}},
		{"a bad collector", "/metrics?collect[]=bogus", self, 400, []string{`unknown collector "bogus"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Metrics(cached, newCollector, tc.self, nil).ServeHTTP(rec, httptest.NewRequest("GET", tc.target, nil))
			body := rec.Body.String()
			if rec.Code != tc.code {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.code, body)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q:\n%s", s, body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("body has %q:\n%s", s, body)
				}
			}
		})
	}
}
