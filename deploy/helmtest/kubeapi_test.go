package helmtest

import (
	"slices"
	"strings"
	"testing"
)

// TestPodMetadataURL: the exporter reads pod metadata from the address of
// kubernetes.podMetadata.source: the API server (the default at
// kubernetes.default.svc, or kubernetes.podMetadata.apiServer) or the
// node's kubelet, verified with the service account's CA.
func TestPodMetadataURL(t *testing.T) {
	c := loadChart(t)
	meta := func(kv map[string]any) map[string]any {
		kv["enabled"] = true
		return map[string]any{"kubernetes": map[string]any{"podMetadata": kv}}
	}
	const pods = "/api/v1/pods?fieldSelector=spec.nodeName%3D$(NODE_NAME)"
	for _, tc := range []struct {
		name string
		vals map[string]any
		url  string
	}{
		{"default", meta(map[string]any{}), "https://kubernetes.default.svc" + pods},
		{"API server address", meta(map[string]any{"apiServer": "https://10.0.0.1:6443"}), "https://10.0.0.1:6443" + pods},
		{"trailing slash", meta(map[string]any{"apiServer": "https://api.example:6443/"}), "https://api.example:6443" + pods},
		{"kubelet", meta(map[string]any{"source": "kubelet", "apiServer": "https://10.0.0.1:6443"}), "https://$(NODE_IP):10250/pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, tc.vals)
			args := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args
			if !slices.Contains(args, "--kubernetes.pod-metadata="+tc.url) {
				t.Errorf("args %q lack --kubernetes.pod-metadata=%s", args, tc.url)
			}
			if !slices.Contains(args, "--kubernetes.pod-metadata.ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt") {
				t.Errorf("args %q: pod metadata not verified with the service account's CA", args)
			}
		})
	}
	for _, bad := range []string{"http://10.0.0.1:6443", "https://10.0.0.1:6443/api", "kubernetes.default.svc"} {
		_, err := render(c, meta(map[string]any{"apiServer": bad}))
		if err == nil || !strings.Contains(err.Error(), "apiServer") {
			t.Errorf("apiServer %q: error %v, want a schema error naming apiServer", bad, err)
		}
	}
}
