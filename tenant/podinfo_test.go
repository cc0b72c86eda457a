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

const (
	uidChat  = "11111111-1111-4111-8111-111111111111"
	uidTrain = "44444444-4444-4444-8444-444444444444"
)

// podInfoPods are the pods of the pod info tests: chat holds GPU-a (its
// server container) and a replica of GPU-b (its sidecar), search-N
// replicas of GPU-b, train-0 MIG-c1 by the older device ID, gone a GPU
// the readings do not have.
func podInfoPods(extra ...string) []*podresourcesv1.PodResources {
	ctr := func(name string, ids ...string) *podresourcesv1.ContainerResources {
		return &podresourcesv1.ContainerResources{Name: name, Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: ids}}}
	}
	pods := []*podresourcesv1.PodResources{
		{Namespace: "llm", Name: "chat-0", Containers: []*podresourcesv1.ContainerResources{ctr("server", "GPU-a"), ctr("sidecar", "GPU-b::3", "GPU-b::4")}},
		{Namespace: "research", Name: "train-0", Containers: []*podresourcesv1.ContainerResources{ctr("trainer", "MIG-GPU-c/1/0")}},
		{Namespace: "ops", Name: "gone", Containers: []*podresourcesv1.ContainerResources{ctr("x", "GPU-zzz")}},
	}
	for _, name := range extra {
		pods = append(pods, &podresourcesv1.PodResources{Namespace: "llm", Name: name, Containers: []*podresourcesv1.ContainerResources{ctr("triton", "GPU-b::0")}})
	}
	return pods
}

const podInfoPodList = `{"kind":"PodList","items":[
 {"metadata":{"name":"chat-0","namespace":"llm","uid":"` + uidChat + `","labels":{"app":"chat"}}},
 {"metadata":{"name":"train-0","namespace":"research","uid":"` + uidTrain + `","labels":{"app":"train"}}}
]}`

func podInfoMapping(t *testing.T, extra ...string) *kube.Mapping {
	t.Helper()
	m, err := kube.NewMappingWithMetadata(&podresourcesv1.ListPodResourcesResponse{PodResources: podInfoPods(extra...)}, "pods.json", []byte(podInfoPodList))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// podInfoReadings: chat's process on GPU-a (its cgroup names its pod),
// GPU-b shared, GPU-c in MIG mode.
func podInfoReadings() *gpu.Readings {
	p := testutil.Proc(101, "python")
	p.Cgroup = "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uidChat, "-", "_") + ".slice/cri-containerd-" + strings.Repeat("1", 64) + ".scope"
	return &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-a", Up: true, Mode: gpu.SharingExclusive, Processes: []gpu.Process{p}},
		{Index: 1, UUID: "GPU-b", Up: true, Mode: gpu.SharingTimeSlice},
		{Index: 2, UUID: "GPU-c", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
			MIG: []gpu.MIGInstance{{UUID: "MIG-c1", GPUInstanceID: 1}, {UUID: "MIG-c2", GPUInstanceID: 2}}},
	}}
}

// allocs writes the pod info's allocations one a line.
func allocs(pi *PodInfo) string {
	if pi == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, a := range pi.Allocations {
		fmt.Fprintf(&b, "%s gpu=%d/%s gi=%q %s/%s/%s\n", a.Tenant, a.GPU, a.UUID, a.GPUInstance, a.Namespace, a.Pod, a.Container)
	}
	fmt.Fprintf(&b, "dropped=%d max=%d", pi.DroppedTotal, pi.MaxSeries)
	return b.String()
}

// TestPodInfo: each container's GPU (or MIG instance) with its pod's
// tenant, off by default; a tenant its processes were attributed to wins
// over the pod's alone.
func TestPodInfo(t *testing.T) {
	const fileTenants = `tenants:
  - name: chat-py
    selectors: [{executable: python, kubernetes: {namespace: llm}}]
  - name: trainers
    selectors: [{mig_uuid: MIG-c1}]
`
	for _, tc := range []struct {
		name    string
		file    string
		tenancy PodTenancy
		opts    PodInfoOptions
		want    string
	}{
		{"off", "", PodTenancy{ByNamespace: true}, PodInfoOptions{}, "<nil>"},
		{"namespace tenants", "", PodTenancy{ByNamespace: true}, PodInfoOptions{On: true}, `llm gpu=0/GPU-a gi="" llm/chat-0/server
llm gpu=1/GPU-b gi="" llm/chat-0/sidecar
research gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=0 max=512`},
		{"label tenants", "", PodTenancy{Label: "app"}, PodInfoOptions{On: true, MaxSeries: 10}, `chat gpu=0/GPU-a gi="" llm/chat-0/server
chat gpu=1/GPU-b gi="" llm/chat-0/sidecar
train gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=0 max=10`},
		// chat's process matches chat-py by its executable, which chat's
		// sidecar on GPU-b (no process) cannot; the MIG instance's tenant
		// by its UUID.
		{"tenants file", fileTenants, PodTenancy{}, PodInfoOptions{On: true}, `chat-py gpu=0/GPU-a gi="" llm/chat-0/server
unassigned gpu=1/GPU-b gi="" llm/chat-0/sidecar
trainers gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=0 max=512`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := EmptyConfig()
			if tc.file != "" {
				var err error
				if cfg, err = ParseConfig("t.yaml", []byte(tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := NewBuilder(cfg, BuilderOptions{Pods: fixedPods{podInfoMapping(t)}, PodTenancy: tc.tenancy, PodInfo: tc.opts, Proc: fakeProc{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := allocs(b.Build(podInfoReadings(), gpu.SamplerStats{}).PodInfo); got != tc.want {
				t.Errorf("pod info:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestPodInfoNeedsPods: without a pod mapping there is no pod info.
func TestPodInfoNeedsPods(t *testing.T) {
	b, err := NewBuilder(nil, BuilderOptions{PodInfo: PodInfoOptions{On: true}})
	if err != nil {
		t.Fatal(err)
	}
	if pi := b.Build(podInfoReadings(), gpu.SamplerStats{}).PodInfo; pi != nil {
		t.Errorf("pod info without pods: %s", allocs(pi))
	}
}

// TestPodInfoBound: beyond MaxSeries allocations are left out, each
// counted once and logged; those served stay served when a newcomer would
// sort before them; a pod that leaves takes its series with it and frees
// room for one left out.
func TestPodInfoBound(t *testing.T) {
	pods := &fixedPods{podInfoMapping(t)}
	var logs bytes.Buffer
	b, err := NewBuilder(nil, BuilderOptions{Pods: pods, PodTenancy: PodTenancy{ByNamespace: true}, PodInfo: PodInfoOptions{On: true, MaxSeries: 3}, Logger: log.NewLogfmtLogger(&logs), Proc: fakeProc{}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		extra []string // search pods beside the fixed ones
		want  string
		logs  int // warnings so far
	}{
		{"under the bound", nil, `llm gpu=0/GPU-a gi="" llm/chat-0/server
llm gpu=1/GPU-b gi="" llm/chat-0/sidecar
research gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=0 max=3`, 0},
		// a-search sorts before everything on GPU-b but finds no room
		{"newcomer left out", []string{"a-search"}, `llm gpu=0/GPU-a gi="" llm/chat-0/server
llm gpu=1/GPU-b gi="" llm/chat-0/sidecar
research gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=1 max=3`, 1},
		{"still left out: counted once", []string{"a-search"}, `llm gpu=0/GPU-a gi="" llm/chat-0/server
llm gpu=1/GPU-b gi="" llm/chat-0/sidecar
research gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=1 max=3`, 1},
		{"two more", []string{"a-search", "b-search", "c-search"}, `llm gpu=0/GPU-a gi="" llm/chat-0/server
llm gpu=1/GPU-b gi="" llm/chat-0/sidecar
research gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=3 max=3`, 2},
	}
	for _, st := range steps {
		pods.m = podInfoMapping(t, st.extra...)
		if got := allocs(b.Build(podInfoReadings(), gpu.SamplerStats{}).PodInfo); got != st.want {
			t.Errorf("%s: pod info:\n%s\nwant:\n%s", st.name, got, st.want)
		}
		if n := strings.Count(logs.String(), "pod info series left out"); n != st.logs {
			t.Errorf("%s: %d warnings, want %d:\n%s", st.name, n, st.logs, logs.String())
		}
	}
	// chat-0 leaves: its two series go, and two of those left out, in
	// order, take their room.
	m, err := kube.NewMappingWithMetadata(&podresourcesv1.ListPodResourcesResponse{PodResources: podInfoPods("a-search", "b-search", "c-search")[1:]}, "pods.json", []byte(podInfoPodList))
	if err != nil {
		t.Fatal(err)
	}
	pods.m = m
	want := `llm gpu=1/GPU-b gi="" llm/a-search/triton
llm gpu=1/GPU-b gi="" llm/b-search/triton
research gpu=2/GPU-c gi="1" research/train-0/trainer
dropped=3 max=3`
	if got := allocs(b.Build(podInfoReadings(), gpu.SamplerStats{}).PodInfo); got != want {
		t.Errorf("pod gone: pod info:\n%s\nwant:\n%s", got, want)
	}
	// GPU-c lost: no series on it meanwhile.
	r := podInfoReadings()
	r.Devices[2].Up = false
	want = `llm gpu=1/GPU-b gi="" llm/a-search/triton
llm gpu=1/GPU-b gi="" llm/b-search/triton
llm gpu=1/GPU-b gi="" llm/c-search/triton
dropped=3 max=3`
	if got := allocs(b.Build(r, gpu.SamplerStats{}).PodInfo); got != want {
		t.Errorf("GPU-c lost: pod info:\n%s\nwant:\n%s", got, want)
	}
}
