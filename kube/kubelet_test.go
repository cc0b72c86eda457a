package kube_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// fakeKubelet implements the kubelet's real PodResourcesListerServer.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	mu   sync.Mutex
	pods []*podresourcesv1.PodResources
}

func (f *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &podresourcesv1.ListPodResourcesResponse{PodResources: f.pods}, nil
}

func (f *fakeKubelet) set(pods ...*podresourcesv1.PodResources) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

func pod(ns, name, container, resource string, ids ...string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{{
		Name:    container,
		Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}},
	}}}
}

// serveKubelet starts the fake on a unix socket in a temp dir.
func serveKubelet(t *testing.T, f podresourcesv1.PodResourcesListerServer) (socket string, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket = filepath.Join(dir, "kubelet.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	var once sync.Once
	stop = func() { once.Do(srv.Stop) }
	t.Cleanup(stop)
	return socket, stop
}

const (
	uidChat    = "11111111-1111-4111-8111-111111111111"
	uidSearch0 = "22222222-2222-4222-8222-222222222222"
	uidSearch1 = "33333333-3333-4333-8333-333333333333"
	uidTrain   = "44444444-4444-4444-8444-444444444444"
)

func podCgroup(uid string) string {
	return "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + strings.Repeat(uid[:1], 64) + ".scope"
}

const kubeTenants = `tenants:
  - name: chat
    class: latency
    selectors: [{kubernetes: {namespace: llm, pod: "chat-*", container: server}}]
  - name: search
    class: latency
    selectors: [{kubernetes: {namespace: llm, labels: {app: search}}}]
  - name: train
    class: batch
    selectors: [{kubernetes: {namespace: research}}]
`

var podListJSON = `{"kind":"PodList","items":[
 {"metadata":{"name":"chat-0","namespace":"llm","uid":"` + uidChat + `","labels":{"app":"chat"}}},
 {"metadata":{"name":"search-0","namespace":"llm","uid":"` + uidSearch0 + `","labels":{"app":"search"}},
  "status":{"containerStatuses":[{"name":"triton","containerID":"containerd://` + strings.Repeat("2", 64) + `"}]}},
 {"metadata":{"name":"search-1","namespace":"llm","uid":"` + uidSearch1 + `","labels":{"app":"search"}}},
 {"metadata":{"name":"train-0","namespace":"research","uid":"` + uidTrain + `"}}
]}`

func kubeReadings() *gpu.Readings {
	proc := func(pid uint32, cg string) gpu.Process {
		p := testutil.Proc(pid, "")
		p.Cgroup = cg
		return p
	}
	return &gpu.Readings{Time: time.Unix(100, 0), Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-a", Up: true, Mode: gpu.SharingExclusive, Processes: []gpu.Process{proc(101, "")}},
		{Index: 1, UUID: "GPU-b", Up: true, Mode: gpu.SharingTimeSlice, Processes: []gpu.Process{proc(102, ""), proc(103, podCgroup(uidSearch1))}},
		{Index: 2, UUID: "GPU-c", Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
			MIG: []gpu.MIGInstance{{UUID: "MIG-c1", GPUInstanceID: 1}, {UUID: "MIG-c2", GPUInstanceID: 2}}},
	}}
}

func tenantsByKey(s *tenant.Snapshot) map[string]string {
	m := map[string]string{}
	for _, u := range s.Usage {
		k := u.UUID
		if u.GPUInstance != "" {
			k += "/" + u.GPUInstance
		}
		if m[k] != "" {
			m[k] += ","
		}
		m[k] += u.Tenant
	}
	return m
}

func TestKubeletPodResources(t *testing.T) {
	fk := &fakeKubelet{}
	fk.set(
		pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"),
		pod("llm", "search-0", "triton", "nvidia.com/gpu.shared", "GPU-b::0"),
		pod("llm", "search-1", "triton", "nvidia.com/gpu.shared", "GPU-b::1"),
		pod("research", "train-0", "trainer", "nvidia.com/mig-3g.71gb", "MIG-c1"),
		pod("kube-system", "no-gpu", "x", "example.com/other", ""),
	)
	socket, stop := serveKubelet(t, fk)

	procRoot := t.TempDir()
	kube.WriteProc(t, procRoot, 101, "0::"+podCgroup(uidChat)+"\n", "", "")
	kube.WriteProc(t, procRoot, 102, "12:memory:"+podCgroup(uidSearch0)+"\n1:name=systemd:/\n", "", "")
	metaFile := filepath.Join(t.TempDir(), "pods.json")
	if err := os.WriteFile(metaFile, []byte(podListJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}

	for _, withMeta := range []bool{true, false} {
		t.Run(map[bool]string{true: "with pod metadata", false: "pod-resources only"}[withMeta], func(t *testing.T) {
			opts := kube.Options{Clock: gpu.NewManualClock(time.Unix(100, 0)), PodResourcesSocket: socket}
			if withMeta {
				opts.PodMetadata = metaFile
			}
			b, _ := newBuilder(t, cfg, procRoot, opts)
			s := b.Build(kubeReadings(), gpu.SamplerStats{})
			if s.Kubelet == nil || s.Kubelet.Up {
				t.Fatalf("before the first refresh: %+v", s.Kubelet)
			}
			b.Refresh(context.Background())
			s = b.Build(kubeReadings(), gpu.SamplerStats{})
			if s.Kubelet == nil || !s.Kubelet.Up || s.Kubelet.PodsMapped != 4 || s.Kubelet.ErrorsTotal != 0 {
				t.Fatalf("kubelet status %+v", s.Kubelet)
			}
			got := tenantsByKey(s)
			// MIG-c2 has no process, no pod holds it and it is idle:
			// nobody's, no usage (not unassigned's)
			want := map[string]string{"GPU-a": "chat", "GPU-c/1": "train", "GPU-c/2": ""}
			if withMeta {
				// shared replicas are told apart by pod UID -> labels
				want["GPU-b"] = "search"
			} else {
				// two pods share GPU-b and pod-resources names no UIDs:
				// without metadata the processes stay unassigned
				want["GPU-b"] = tenant.Unassigned
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s -> %q, want %q (all %v)", k, got[k], v, got)
				}
			}
		})
	}

	// exercise the refresh paths on one builder: pod goes away, kubelet down
	var logs bytes.Buffer
	b, mapper := newBuilder(t, cfg, procRoot, kube.Options{Clock: gpu.NewManualClock(time.Unix(100, 0)), PodResourcesSocket: socket, PodMetadata: metaFile, Timeout: 2 * time.Second,
		Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
	b.Refresh(context.Background())
	if got := tenantsByKey(b.Build(kubeReadings(), gpu.SamplerStats{})); got["GPU-a"] != "chat" {
		t.Fatalf("GPU-a -> %q", got["GPU-a"])
	}
	fk.set(
		pod("llm", "search-0", "triton", "nvidia.com/gpu.shared", "GPU-b::0"),
		pod("llm", "search-1", "triton", "nvidia.com/gpu.shared", "GPU-b::1"),
		pod("research", "train-0", "trainer", "nvidia.com/mig-3g.71gb", "MIG-c1"),
	)
	b.Refresh(context.Background())
	s := b.Build(kubeReadings(), gpu.SamplerStats{})
	if got := tenantsByKey(s); got["GPU-a"] != tenant.Unassigned {
		// chat-0's UID is still in the pod metadata, but no container of it
		// holds GPU-a any more, so its process cannot be placed in the
		// container "server" that chat's selector names
		t.Errorf("GPU-a -> %q after chat-0 released it, want %q", got["GPU-a"], tenant.Unassigned)
	}
	if mapping := mapper.Mapping(); len(mapping.PodsOn("GPU-a")) != 0 || mapping.Pods() != 3 {
		t.Errorf("chat-0 went away but is still mapped: %+v", mapping)
	}
	if s.Kubelet.PodsMapped != 3 {
		t.Errorf("pods mapped %d, want 3", s.Kubelet.PodsMapped)
	}

	stop()
	b.Refresh(context.Background())
	s = b.Build(kubeReadings(), gpu.SamplerStats{})
	if s.Kubelet.Up || s.Kubelet.ErrorsTotal != 1 || s.Kubelet.PodsMapped != 3 {
		t.Errorf("kubelet down: %+v", s.Kubelet)
	}
	if got := tenantsByKey(s); got["GPU-c/1"] != "train" || got["GPU-b"] != "search" {
		t.Errorf("last good mapping not kept: %v", got)
	}
	if !strings.Contains(logs.String(), "refresh failed") || !strings.Contains(logs.String(), "socket "+socket) {
		t.Errorf("the failure log does not name the socket %s:\n%s", socket, logs.String())
	}
}

func TestKubeletPodGoneWithoutMetadata(t *testing.T) {
	fk := &fakeKubelet{}
	fk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
	socket, _ := serveKubelet(t, fk)
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true, Processes: []gpu.Process{{PID: 7, GPUInstanceID: -1, UID: -1, Cgroup: podCgroup(uidChat)}}}}}
	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket})
	b.Refresh(context.Background())
	if got := tenantsByKey(b.Build(r, gpu.SamplerStats{})); got["GPU-a"] != "chat" {
		t.Fatalf("GPU-a -> %q", got["GPU-a"])
	}
	fk.set()
	b.Refresh(context.Background())
	if got := tenantsByKey(b.Build(r, gpu.SamplerStats{})); got["GPU-a"] != tenant.Unassigned {
		t.Fatalf("pod went away: GPU-a -> %q", got["GPU-a"])
	}
}

func TestKubeletStartLoop(t *testing.T) {
	fk := &fakeKubelet{}
	fk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
	socket, _ := serveKubelet(t, fk)
	b, _ := newBuilder(t, nil, t.TempDir(), kube.Options{PodResourcesSocket: socket})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Start(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := b.Build(nil, gpu.SamplerStats{})
		if s.Kubelet.Up {
			if s.Kubelet.PodsMapped != 1 {
				t.Fatalf("status %+v", s.Kubelet)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubelet loop never refreshed: %+v", s.Kubelet)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMappingLegacyMIGAndReplicas(t *testing.T) {
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("research", "train-0", "trainer", "nvidia.com/mig-1g.18gb", "MIG-GPU-c/2/0"),
		pod("llm", "a", "x", "nvidia.com/gpu", "GPU-b::0", "GPU-b::1"),
		nil,
		{Name: "", Namespace: "bad"},
	}}
	m := kube.NewMapping(resp)
	if m.Pods() != 2 || len(m.PodsOn("GPU-b")) != 1 {
		t.Fatalf("mapping %+v", m)
	}
	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tenant.NewBuilder(cfg, tenant.BuilderOptions{Pods: staticPods{m}})
	if err != nil {
		t.Fatal(err)
	}
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-c", Up: true, MIGEnabled: true,
		MIG: []gpu.MIGInstance{{UUID: "MIG-x", GPUInstanceID: 2}}}}}
	if got := tenantsByKey(b.Build(r, gpu.SamplerStats{})); got["GPU-c/2"] != "train" {
		t.Errorf("legacy MIG device ID: %v", got)
	}
}

// slowKubelet blocks List until released.
type slowKubelet struct {
	fakeKubelet
	entered chan struct{}
	release chan struct{}
}

func (s *slowKubelet) List(ctx context.Context, r *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.fakeKubelet.List(ctx, r)
}

// TestKubeletSlowDoesNotBlockBuild: Build returns while a refresh is stuck
// in the kubelet, with the last good mapping.
func TestKubeletSlowDoesNotBlockBuild(t *testing.T) {
	sk := &slowKubelet{entered: make(chan struct{}, 1), release: make(chan struct{})}
	sk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
	slowSock, _ := serveKubelet(t, sk)

	cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newBuilder(t, cfg, t.TempDir(), kube.Options{PodResourcesSocket: slowSock, Timeout: time.Minute})
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true, Processes: []gpu.Process{{PID: 7, GPUInstanceID: -1, UID: -1, Cgroup: podCgroup(uidChat)}}}}}

	done := make(chan struct{})
	go func() { b.Refresh(context.Background()); close(done) }()
	<-sk.entered
	sk.release <- struct{}{}
	<-done
	if got := tenantsByKey(b.Build(r, gpu.SamplerStats{})); got["GPU-a"] != "chat" {
		t.Fatalf("GPU-a -> %q", got["GPU-a"])
	}

	// the second refresh hangs in the kubelet; Build still answers
	sk.set()
	go func() { b.Refresh(context.Background()) }()
	<-sk.entered
	s := b.Build(r, gpu.SamplerStats{})
	if got := tenantsByKey(s); got["GPU-a"] != "chat" || !s.Kubelet.Up {
		t.Errorf("during a slow refresh: %v %+v", got, s.Kubelet)
	}
	close(sk.release)
}

func TestPodMetadataNeedsSocket(t *testing.T) {
	_, err := kube.NewMapper(kube.Options{PodMetadata: "/var/run/pods.json"})
	if err == nil || !strings.Contains(err.Error(), "/var/run/pods.json") || !strings.Contains(err.Error(), "pod-resources socket") {
		t.Errorf("err = %v, want an error naming the metadata source and the missing socket", err)
	}
}

// newBuilder is a tenant.Builder on a kube.Mapper of opts and, unless
// procRoot is "", /proc facts under procRoot, wired as the exporter wires
// them.
func newBuilder(t *testing.T, cfg *tenant.Config, procRoot string, opts kube.Options) (*tenant.Builder, *kube.Mapper) {
	t.Helper()
	m, err := kube.NewMapper(opts)
	if err != nil {
		t.Fatal(err)
	}
	bopts := tenant.BuilderOptions{Clock: opts.Clock, Logger: opts.Logger, Pods: m}
	if procRoot != "" {
		bopts.Proc = kube.NewProcReader(procRoot)
	}
	b, err := tenant.NewBuilder(cfg, bopts)
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

// staticPods is a tenant.PodMapper with a fixed mapping.
type staticPods struct{ m *kube.Mapping }

func (s staticPods) Start(context.Context)   {}
func (s staticPods) Wait()                   {}
func (s staticPods) Refresh(context.Context) {}
func (s staticPods) Mapping() *kube.Mapping  { return s.m }
func (s staticPods) Status() kube.Status     { return kube.Status{Up: true} }
