package helmtest

import (
	"slices"
	"strings"
	"testing"
)

// TestPodInfo: kubernetes.podInfo passes --kubernetes.pod-info and its
// bound, and makes the ServiceMonitor honor the scraped labels (the
// series' namespace, pod and container are the workload's); off by
// default, with neither; a bound below 1 is refused by the schema.
func TestPodInfo(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name   string
		vals   map[string]any
		args   []string
		honour bool
	}{
		{"default", map[string]any{}, nil, false},
		{"on", map[string]any{"enabled": true}, []string{"--kubernetes.pod-info", "--kubernetes.pod-info.max-series=512"}, true},
		{"on, bound", map[string]any{"enabled": true, "maxSeries": 64}, []string{"--kubernetes.pod-info", "--kubernetes.pod-info.max-series=64"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, map[string]any{"kubernetes": map[string]any{"podInfo": tc.vals}})
			got := argsWithPrefix(container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args, "--kubernetes.pod-info")
			if !slices.Equal(got, tc.args) {
				t.Errorf("pod info args %q, want %q", got, tc.args)
			}
			if len(m.serviceMonitors) != 1 {
				t.Fatalf("%d ServiceMonitors, want 1", len(m.serviceMonitors))
			}
			if h := m.serviceMonitors[0].Spec.Endpoints[0].HonorLabels; h != tc.honour {
				t.Errorf("ServiceMonitor honorLabels %v, want %v", h, tc.honour)
			}
		})
	}
	_, err := render(c, map[string]any{"kubernetes": map[string]any{"podInfo": map[string]any{"enabled": true, "maxSeries": 0}}})
	if err == nil || !strings.Contains(err.Error(), "maxSeries") {
		t.Errorf("maxSeries 0: error %v, want a schema error naming maxSeries", err)
	}
}
