package kube_test

import (
	"context"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// passKubelet's answers are slow passes.
type passKubelet struct {
	fakeKubelet
	*gpu.SlowPasses
}

func (k *passKubelet) List(ctx context.Context, r *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.Pass()
	return k.fakeKubelet.List(ctx, r)
}

// The mapping is refreshed every refresh interval, whatever a refresh
// takes (a slow kubelet): one that takes part of the interval does not
// push the next ones later, and one that takes longer than the interval
// is followed at the next whole interval from its start.
func TestMapperKeepsItsCadence(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		took time.Duration
		want []time.Duration
	}{
		{0, []time.Duration{0, 10 * s, 20 * s, 30 * s}},
		{3 * s, []time.Duration{0, 10 * s, 20 * s, 30 * s}},
		{15 * s, []time.Duration{0, 20 * s, 40 * s}},
	} {
		testutil.CheckCadence(t, "refreshes", time.Unix(0, 0), s, tc.took, tc.want, func(ctx context.Context, passes *gpu.SlowPasses) func() {
			socket, _ := serveKubelet(t, &passKubelet{SlowPasses: passes})
			m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, Clock: passes.Clock, Refresh: 10 * s, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			m.Start(ctx)
			return m.Wait
		})
	}
}
