package tenant

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestForeignPodOnHolderGPU: without pod metadata (the chart's default,
// namespace tenancy), a process of a pod that reaches a GPU not allocated
// to it (NVIDIA_VISIBLE_DEVICES=all, a privileged container) is placed by
// its GPU in the pod that holds it, or among the pods that share it.
// Running beside the holders' own, it is not charged to their namespace
// nor named as a holder pod for a move: of more pod UIDs than pods placed
// among them in one sample, only those they were bound to before keep
// their place (none where they were bound to none), and the contest is
// logged, rate-limited.
func TestForeignPodOnHolderGPU(t *testing.T) {
	const (
		victim = "11111111-1111-4111-8111-111111111111"
		evil   = "deadbeef-0000-4000-8000-000000000001"
	)
	cgroupOf := func(uid string) string {
		return "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + strings.Repeat(uid[:1], 64) + ".scope"
	}
	holder := func(name, id string) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Namespace: "llm", Name: name, Containers: []*podresourcesv1.ContainerResources{
			{Name: "server", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{id}}}}}}
	}
	exclusive := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{holder("chat-0", "GPU-a")}})
	// two pods of llm on replicas of GPU-a: a process of either is llm's
	shared := kube.NewMapping(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{holder("chat-0", "GPU-a::0"), holder("chat-1", "GPU-a::1")}})
	const second = "33333333-3333-4333-8333-333333333333"
	sample := func(at int64, uids ...string) *gpu.Readings {
		d := gpu.Device{Index: 0, UUID: "GPU-a", Up: true, Mode: gpu.SharingExclusive}
		for _, uid := range uids {
			p := testutil.Proc(uint32(100+len(d.Processes)), "python")
			p.Cgroup = cgroupOf(uid)
			if uid == evil {
				p.PID = 666
			}
			d.Processes = append(d.Processes, p)
		}
		return &gpu.Readings{Time: time.Unix(at, 0), Devices: []gpu.Device{d}}
	}
	for _, tc := range []struct {
		name    string
		m       *kube.Mapping
		samples []*gpu.Readings
		want    string // the last sample's usage: tenant, PIDs, workloads' pods
		logs    int    // contest lines
	}{
		{"the holder's process alone", exclusive, []*gpu.Readings{sample(100, victim)},
			"llm [100] [llm/chat-0/" + victim + "]\n", 0},
		{"another pod's beside the holder's, first seen together: neither", exclusive, []*gpu.Readings{sample(100, victim, evil)},
			"unassigned [100 666] []\n", 1},
		{"another pod's beside the holder's, which came first", exclusive, []*gpu.Readings{sample(100, victim), sample(110, victim, evil), sample(120, victim, evil)},
			"llm [100] [llm/chat-0/" + victim + "]\nunassigned [666] []\n", 1},
		{"the holder replaced under its name", exclusive, []*gpu.Readings{sample(100, victim), sample(110, evil)},
			"llm [666] [llm/chat-0/" + evil + "]\n", 0},
		{"two holders sharing the GPU, their processes", shared, []*gpu.Readings{sample(100, victim, second)},
			"llm [100 101] []\n", 0},
		{"two holders sharing the GPU, another pod's beside theirs", shared, []*gpu.Readings{sample(100, victim, second), sample(110, victim, second, evil)},
			"llm [100 101] []\nunassigned [666] []\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			b, err := NewBuilder(EmptyConfig(), BuilderOptions{Pods: fixedPods{tc.m}, PodTenancy: PodTenancy{ByNamespace: true}, AllowEmpty: true, Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			var s *Snapshot
			for _, r := range tc.samples {
				s = b.Build(r, gpu.SamplerStats{})
			}
			var got strings.Builder
			for _, u := range s.Usage {
				var pods []string
				for _, w := range u.Workloads {
					if w.Pod != nil {
						pods = append(pods, w.Pod.Namespace+"/"+w.Pod.Name+"/"+w.Pod.UID)
					}
				}
				fmt.Fprintf(&got, "%s %v %v\n", u.Tenant, u.PIDs, pods)
			}
			if got.String() != tc.want {
				t.Errorf("got:\n%swant:\n%s", got.String(), tc.want)
			}
			if n := strings.Count(logs.String(), "processes of more pod UIDs than pods"); n != tc.logs {
				t.Errorf("%d contest lines, want %d:\n%s", n, tc.logs, logs.String())
			}
			if tc.logs > 0 && (!strings.Contains(logs.String(), victim+",") || !strings.Contains(logs.String(), evil) || !strings.Contains(logs.String(), "gpus=GPU-a")) {
				t.Errorf("the contest line names not both UIDs and the GPU:\n%s", logs.String())
			}
		})
	}
}
