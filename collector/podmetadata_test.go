package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestPodMetadataUpOnlyOnceRead: the pod metadata is read only after a
// good pod-resources query, so while that has failed from the start the
// metadata was never tried; its up is then absent (as its last success
// is), not a 0 that VGPUExporterPodMetadataFailing would fire on. The
// error counter is served from 0 all along.
func TestPodMetadataUpOnlyOnceRead(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	const head = `# HELP vgpu_kubelet_pod_metadata_errors_total Failed reads of the pod metadata (--kubernetes.pod-metadata).
# TYPE vgpu_kubelet_pod_metadata_errors_total counter
`
	const upHead = `# HELP vgpu_kubelet_pod_metadata_up 1 if the last read of the pod metadata (--kubernetes.pod-metadata) succeeded, 0 if not (the last good metadata stays in use); absent before the first read.
# TYPE vgpu_kubelet_pod_metadata_up gauge
`
	tests := []struct {
		name string
		md   kube.MetadataStatus
		want string
	}{
		{"never read", kube.MetadataStatus{Source: "/run/pods.json"},
			head + "vgpu_kubelet_pod_metadata_errors_total 0\n"},
		{"failed from the first read", kube.MetadataStatus{Source: "/run/pods.json", ErrorsTotal: 1},
			head + "vgpu_kubelet_pod_metadata_errors_total 1\n" + upHead + "vgpu_kubelet_pod_metadata_up 0\n"},
		{"read", kube.MetadataStatus{Source: "/run/pods.json", Up: true, LastSuccess: t0},
			head + "vgpu_kubelet_pod_metadata_errors_total 0\n" + upHead + "vgpu_kubelet_pod_metadata_up 1\n"},
		{"failing after a good read", kube.MetadataStatus{Source: "/run/pods.json", LastSuccess: t0, ErrorsTotal: 3},
			head + "vgpu_kubelet_pod_metadata_errors_total 3\n" + upHead + "vgpu_kubelet_pod_metadata_up 0\n"},
		{"no source", kube.MetadataStatus{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// pod-resources down from the start
			snap := &tenant.Snapshot{Kubelet: &tenant.KubeletStatus{ErrorsTotal: 4, Metadata: tc.md}}
			e := newExporter(t, snap, "exporter")
			if err := testutil.CollectAndCompare(e, strings.NewReader(tc.want),
				"vgpu_kubelet_pod_metadata_up", "vgpu_kubelet_pod_metadata_errors_total"); err != nil {
				t.Error(err)
			}
		})
	}
}
