//go:build kube

package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// checkPodInfo waits until the exporter (kubernetes.podInfo.enabled)
// serves exactly one vgpu_tenant_pod_info series per pod held, with the
// pod's namespace, name and container (worker), the shared GPU and the
// tenant tenantOf gives it, and none for the pods gone (evicted, deleted)
// nor any other: nothing stale, nothing dropped.
func (c *cluster) checkPodInfo(ctx context.Context, held, gone []podRef, tenantOf func(podRef) string) {
	t := c.t
	t.Helper()
	var got []sample
	err := poll(2*time.Minute, 2*time.Second, func() (bool, string, error) {
		m := c.scrape(ctx)
		got = series(m, "vgpu_tenant_pod_info", nil)
		if d, ok := value(m, "vgpu_tenant_pod_info_dropped_total", nil); !ok || d != 0 {
			return false, fmt.Sprintf("vgpu_tenant_pod_info_dropped_total %v (served: %v)", d, ok), nil
		}
		for _, p := range gone {
			if s := series(got, "vgpu_tenant_pod_info", map[string]string{"namespace": p.namespace, "pod": p.name}); len(s) > 0 {
				return false, fmt.Sprintf("pod %s is gone, its series still served: %s", p, formatSamples(s)), nil
			}
		}
		if len(got) != len(held) {
			return false, fmt.Sprintf("%d series for the %d pods %v: %s", len(got), len(held), held, formatSamples(got)), nil
		}
		for _, p := range held {
			want := map[string]string{"namespace": p.namespace, "pod": p.name, "container": "worker",
				"tenant": tenantOf(p), "gpu": sharedGPU, "uuid": p.uuid, "gpu_instance": ""}
			if s := series(got, "vgpu_tenant_pod_info", want); len(s) != 1 || s[0].value != 1 {
				return false, fmt.Sprintf("pod %s: no series %v among %s", p, want, formatSamples(got)), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("pod info: %v", err)
	}
	t.Logf("pod info:\n%s", formatSamples(got))
}

// formatSamples writes samples as the exposition does, one a line, labels
// sorted.
func formatSamples(ss []sample) string {
	var lines []string
	for _, s := range ss {
		var ls []string
		for k, v := range s.labels {
			ls = append(ls, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(ls)
		lines = append(lines, fmt.Sprintf("%s{%s} %v", s.name, strings.Join(ls, ","), s.value))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
