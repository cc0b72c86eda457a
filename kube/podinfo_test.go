package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// TestPodInfoContainers: the container names of a pod-resources answer,
// served over gRPC by a fake kubelet, reach the snapshot's pod info, one
// entry per container and GPU (or MIG instance): a pod with two GPU
// containers and a container without a device, replicas of one GPU held
// by one container, a MIG device by the older ID, a device that dynamic
// resource allocation gave by UUID, and one named only gpu-0 (no entry).
// Each has its pod's tenant; a pod that leaves the answer leaves the pod
// info at the next refresh.
func TestPodInfoContainers(t *testing.T) {
	dra := func(names ...string) []*podresourcesv1.DynamicResource {
		var crs []*podresourcesv1.ClaimResource
		for _, n := range names {
			crs = append(crs, &podresourcesv1.ClaimResource{DriverName: "gpu.example.com", PoolName: "node-a", DeviceName: n})
		}
		return []*podresourcesv1.DynamicResource{{ClaimName: "gpu", ClaimNamespace: "ml", ClaimResources: crs}}
	}
	devs := func(ids ...string) []*podresourcesv1.ContainerDevices {
		return []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: ids}}
	}
	chat := &podresourcesv1.PodResources{Namespace: "llm", Name: "chat-0", Containers: []*podresourcesv1.ContainerResources{
		{Name: "server", Devices: devs("GPU-a")},
		{Name: "embedder", Devices: devs("GPU-b::0", "GPU-b::1")},
		{Name: "proxy"},
	}}
	fk := &fakeKubelet{}
	fk.set(chat,
		&podresourcesv1.PodResources{Namespace: "research", Name: "train-0", Containers: []*podresourcesv1.ContainerResources{
			{Name: "trainer", Devices: devs("MIG-GPU-c/2/0")}}},
		&podresourcesv1.PodResources{Namespace: "ml", Name: "tune-0", Containers: []*podresourcesv1.ContainerResources{
			{Name: "tuner", DynamicResources: dra("MIG-c1", "gpu-0")}}},
	)
	socket, _ := serveKubelet(t, fk)
	metaFile := filepath.Join(t.TempDir(), "pods.json")
	if err := os.WriteFile(metaFile, []byte(podListJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := kube.NewMapper(kube.Options{Clock: gpu.NewManualClock(time.Unix(100, 0)), PodResourcesSocket: socket, PodMetadata: metaFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Pods: m, PodTenancy: tenant.PodTenancy{ByNamespace: true}, PodInfo: tenant.PodInfoOptions{On: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info := func() string {
		b.Refresh(ctx)
		var lines []string
		for _, a := range b.Build(kubeReadings(), gpu.SamplerStats{}).PodInfo.Allocations {
			lines = append(lines, fmt.Sprintf("%s %d/%s/%s %s/%s/%s", a.Tenant, a.GPU, a.UUID, a.GPUInstance, a.Namespace, a.Pod, a.Container))
		}
		return strings.Join(lines, "\n")
	}
	// chat-0's containers: server matches tenant chat by name, embedder
	// not (chat's selector names container server), so its namespace's.
	want := `chat 0/GPU-a/ llm/chat-0/server
llm 1/GPU-b/ llm/chat-0/embedder
ml 2/GPU-c/1 ml/tune-0/tuner
train 2/GPU-c/2 research/train-0/trainer`
	if got := info(); got != want {
		t.Errorf("pod info:\n%s\nwant:\n%s", got, want)
	}
	fk.set(chat)
	want = `chat 0/GPU-a/ llm/chat-0/server
llm 1/GPU-b/ llm/chat-0/embedder`
	if got := info(); got != want {
		t.Errorf("after train-0 and tune-0 left, pod info:\n%s\nwant:\n%s", got, want)
	}
}
