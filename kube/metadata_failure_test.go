package kube_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// podsServer serves a pod list at /pods, or fails with a status code.
type podsServer struct {
	mu     sync.Mutex
	status int
	body   string
}

func (p *podsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != http.StatusOK {
		http.Error(w, http.StatusText(p.status), p.status)
		return
	}
	_, _ = w.Write([]byte(p.body))
}

func (p *podsServer) set(status int, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.body = status, body
}

// When the pod metadata cannot be read, the pod-resources API is not
// reported down: the fresh pod-resources answer is used with the last good
// metadata, and the failure is counted, and logged naming the file or URL,
// as the metadata's own. Pods of the last good metadata keep their labels;
// a pod new since then is known by namespace, name and container only.
func TestPodMetadataFailureKeepsPodResources(t *testing.T) {
	uidNew := "55555555-5555-4555-8555-555555555555"
	uidNewSearch := "66666666-6666-4666-8666-666666666666"
	// The pod list after the new pods came: the exporter does not get to
	// read it while the metadata fails.
	withNew := strings.TrimSuffix(podListJSON, "]}") +
		`,{"metadata":{"name":"chat-1","namespace":"llm","uid":"` + uidNew + `"}}` +
		`,{"metadata":{"name":"search-2","namespace":"llm","uid":"` + uidNewSearch + `","labels":{"app":"search"}}}]}`
	dir := t.TempDir()
	metaFile := filepath.Join(dir, "pods.json")
	srv := &podsServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	for _, tc := range []struct {
		name string
		src  string
		good func(body string) // serves body as the pod metadata
		fail func()
		want string // in the failure's log line
	}{
		{"file not JSON", metaFile,
			func(b string) { writeFile(t, dir, "pods.json", b) },
			func() { writeFile(t, dir, "pods.json", "{not json") }, metaFile},
		{"file gone", metaFile,
			func(b string) { writeFile(t, dir, "pods.json", b) },
			func() { os.Remove(metaFile) }, metaFile},
		{"HTTP 401", hs.URL + "/pods",
			func(b string) { srv.set(http.StatusOK, b) },
			func() { srv.set(http.StatusUnauthorized, "") }, hs.URL + "/pods: HTTP 401"},
		{"not a pod list over HTTP", hs.URL + "/pods",
			func(b string) { srv.set(http.StatusOK, b) },
			func() { srv.set(http.StatusOK, "<html>") }, hs.URL + "/pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := &fakeKubelet{}
			fk.set(
				pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"),
				pod("research", "train-0", "trainer", "nvidia.com/gpu", "GPU-c"),
			)
			socket, _ := serveKubelet(t, fk)
			cfg, err := tenant.ParseConfig("k.yaml", []byte(kubeTenants))
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			clk := gpu.NewManualClock(time.Unix(100, 0))
			b, m := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket, PodMetadata: tc.src, Clock: clk,
				Logger: log.NewLogfmtLogger(log.NewSyncWriter(&logs))})
			proc := func(pid uint32, uid string) gpu.Process {
				return gpu.Process{PID: pid, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1, Cgroup: podCgroup(uid)}
			}
			r := &gpu.Readings{Devices: []gpu.Device{
				{Index: 1, UUID: "GPU-b", Up: true, Processes: []gpu.Process{proc(11, uidSearch0)}},
				{Index: 2, UUID: "GPU-c", Up: true, Processes: []gpu.Process{proc(12, uidTrain)}},
				{Index: 3, UUID: "GPU-d", Up: true, Processes: []gpu.Process{proc(13, uidNew)}},
				{Index: 4, UUID: "GPU-e", Up: true, Processes: []gpu.Process{proc(14, uidNewSearch)}},
			}}

			tc.good(podListJSON)
			b.Refresh(context.Background())
			firstRead := clk.Now()
			if st := m.Status(); !st.Up || !st.Metadata.Up || st.Metadata.Source != tc.src || !st.Metadata.LastSuccess.Equal(firstRead) {
				t.Fatalf("first refresh: %+v", st)
			}

			// New pods come, and the metadata breaks.
			fk.set(
				pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-b"),
				pod("research", "train-0", "trainer", "nvidia.com/gpu", "GPU-c"),
				pod("llm", "chat-1", "server", "nvidia.com/gpu", "GPU-d"),
				pod("llm", "search-2", "triton", "nvidia.com/gpu", "GPU-e"),
			)
			tc.fail()
			clk.Advance(10 * time.Second)
			b.Refresh(context.Background())
			st := m.Status()
			if !st.Up || st.ErrorsTotal != 0 || !st.LastSuccess.Equal(clk.Now()) || st.PodsMapped != 4 {
				t.Errorf("a metadata failure changed the pod-resources status: %+v", st)
			}
			if md := st.Metadata; md.Up || md.ErrorsTotal != 1 || !md.LastSuccess.Equal(firstRead) {
				t.Errorf("metadata status %+v, want down, 1 error, last success at the first refresh", md)
			}
			if refs := m.Mapping().PodsOn("GPU-d"); len(refs) != 1 || refs[0].Name != "chat-1" || refs[0].Labels != nil {
				t.Errorf("GPU-d held by %+v, want the new pod chat-1, without labels", refs)
			}
			got := tenantsByKey(b.Build(r, gpu.SamplerStats{}))
			want := map[string]string{
				"GPU-b": "search",          // labels from the last good metadata
				"GPU-c": "train",           // namespace selector
				"GPU-d": "chat",            // new: namespace, pod and container from pod-resources
				"GPU-e": tenant.Unassigned, // new: its labels are not known yet
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s -> %q, want %q (all %v)", k, got[k], v, got)
				}
			}
			l := logs.String()
			if !strings.Contains(l, "pod metadata read failed") || !strings.Contains(l, tc.want) {
				t.Errorf("the failure is not logged naming %q:\n%s", tc.want, l)
			}
			if strings.Contains(l, "pod-resources refresh failed") {
				t.Errorf("a metadata failure logged as the pod-resources API's:\n%s", l)
			}

			// It reads again: the new pods' labels are known.
			tc.good(withNew)
			clk.Advance(10 * time.Second)
			b.Refresh(context.Background())
			if md := m.Status().Metadata; !md.Up || md.ErrorsTotal != 1 || !md.LastSuccess.Equal(clk.Now()) {
				t.Errorf("after the metadata recovered: %+v", md)
			}
			if got := tenantsByKey(b.Build(r, gpu.SamplerStats{})); got["GPU-e"] != "search" {
				t.Errorf("GPU-e -> %q after the metadata recovered, want search", got["GPU-e"])
			}
			if !strings.Contains(logs.String(), "pod metadata read recovered") {
				t.Errorf("the recovery is not logged:\n%s", logs.String())
			}
		})
	}
}

// Before the first good read of the pod metadata, the pod-resources
// mapping is used without metadata.
func TestPodMetadataNeverRead(t *testing.T) {
	fk := &fakeKubelet{}
	fk.set(pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"))
	socket, _ := serveKubelet(t, fk)
	b, m := newBuilder(t, nil, "", kube.Options{PodResourcesSocket: socket, PodMetadata: filepath.Join(t.TempDir(), "none.json")})
	b.Refresh(context.Background())
	st := m.Status()
	if !st.Up || st.PodsMapped != 1 || st.Metadata.Up || st.Metadata.ErrorsTotal != 1 || !st.Metadata.LastSuccess.IsZero() {
		t.Errorf("status %+v", st)
	}
	if refs := m.Mapping().PodsOn("GPU-a"); len(refs) != 1 || refs[0].Name != "chat-0" {
		t.Errorf("GPU-a held by %+v, want chat-0", refs)
	}
}

// A pod replaced by one of the same name (a StatefulSet's, a new UID)
// while the pod metadata cannot be read is known by what pod-resources
// says of it, with its predecessor's labels: the last good metadata
// knowing its name by the predecessor's UID does not leave it out of the
// device's holders, as it does while the metadata is current. Its
// processes were unassigned, though without pod metadata they were not.
func TestPodMetadataFailureKeepsReplacedPod(t *testing.T) {
	const uidNew = "77777777-7777-4777-8777-777777777777"
	// search's selector names a container: a process that may be in
	// either of two containers is search's only as each of them (Holders)
	const tenants = `tenants:
  - name: chat
    class: latency
    selectors: [{kubernetes: {namespace: llm, pod: "chat-*", container: server}}]
  - name: search
    class: latency
    selectors: [{kubernetes: {namespace: llm, labels: {app: search}, container: "*"}}]
`
	twoOnReplicas := &podresourcesv1.PodResources{Namespace: "llm", Name: "search-1", Containers: []*podresourcesv1.ContainerResources{
		{Name: "triton", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a::0"}}}},
		{Name: "sidecar", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a::1"}}}},
	}}
	for _, tc := range []struct {
		name   string
		holder *podresourcesv1.PodResources // holds GPU-a, before and after
		uidOld string                       // its predecessor's, in podListJSON
		want   string
	}{
		// namespace, pod and container from pod-resources
		{"one container", pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"), uidChat, "chat"},
		// its predecessor's labels
		{"labels", pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-a"), uidSearch0, "search"},
		// its pod, either container (Holders)
		{"two containers on replicas", twoOnReplicas, uidSearch1, "search"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &podsServer{}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			fk := &fakeKubelet{}
			fk.set(tc.holder)
			socket, _ := serveKubelet(t, fk)
			cfg, err := tenant.ParseConfig("k.yaml", []byte(tenants))
			if err != nil {
				t.Fatal(err)
			}
			clk := gpu.NewManualClock(time.Unix(100, 0))
			b, m := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket, PodMetadata: hs.URL + "/pods", Clock: clk})
			on := func(uid string) *gpu.Readings {
				return &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true, Processes: []gpu.Process{
					{PID: 7, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1, Cgroup: podCgroup(uid)}}}}}
			}

			srv.set(http.StatusOK, podListJSON)
			b.Refresh(context.Background())
			if got := tenantsByKey(b.Build(on(tc.uidOld), gpu.SamplerStats{}))["GPU-a"]; got != tc.want {
				t.Fatalf("before the replacement: GPU-a -> %q, want %q", got, tc.want)
			}

			// The pod is replaced (a new UID) and the metadata fails.
			srv.set(http.StatusServiceUnavailable, "")
			clk.Advance(10 * time.Second)
			b.Refresh(context.Background())
			if md := m.Status().Metadata; md.Up || md.ErrorsTotal != 1 {
				t.Fatalf("metadata status %+v, want down", md)
			}
			if got := tenantsByKey(b.Build(on(uidNew), gpu.SamplerStats{}))["GPU-a"]; got != tc.want {
				t.Errorf("replaced during the failure: GPU-a -> %q, want %q", got, tc.want)
			}
		})
	}
}

// While the pod metadata cannot be read, a process on a GPU shared by
// replicas between a pod the last good metadata knows (by a UID other than
// the process's) and pods new since then may be in any of them: the known
// one may have been replaced by one of the same name (a StatefulSet's, a
// new UID), or the process may be in a new one, and pod-resources with
// the stale metadata give the same inputs either way. It is given no pod
// (its pod UID only) and tried as each holder: the tenant they all give,
// else unassigned. A new pod's process was given its own pod, search-0
// left out, and so search-0's replacement's process was charged to job-1's
// tenant batch. Where only the known pod holds the GPU, it is given as a
// replaced one (TestPodMetadataFailureKeepsReplacedPod); a process whose
// pod UID the metadata knows is given its pod and container as ever.
func TestPodMetadataFailureNewPodOnSharedGPU(t *testing.T) {
	const (
		uidJob = "88888888-8888-4888-8888-888888888888"
		uidNew = "77777777-7777-4777-8777-777777777777" // search-0's replacement
	)
	const tenants = `tenants:
  - name: search
    class: latency
    selectors: [{kubernetes: {namespace: llm, labels: {app: search}, container: "*"}}]
  - name: batch
    class: batch
    selectors: [{kubernetes: {namespace: research}}]
`
	search0 := pod("llm", "search-0", "triton", "nvidia.com/gpu", "GPU-a::0")
	train0 := pod("research", "train-0", "trainer", "nvidia.com/gpu", "GPU-a::0")
	chat0 := pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a::1")
	job1 := pod("research", "job-1", "worker", "nvidia.com/gpu", "GPU-a::1")
	job2 := pod("research", "job-2", "worker", "nvidia.com/gpu", "GPU-a::2")
	for _, tc := range []struct {
		name        string
		holders     []*podresourcesv1.PodResources // of GPU-a, all new but search-0, chat-0 and train-0
		uidRead     string                         // the process's pod UID while the metadata is read
		wantRead    string
		uidFailing  string // and while it fails
		wantFailing string
		wantPod     string // namespace/pod/container it is given failing; "" for its pod UID only
	}{
		// job-1's process, or search-0's replacement's: search or batch
		{"a new pod beside another tenant's", []*podresourcesv1.PodResources{search0, job1},
			uidJob, "batch", uidJob, tenant.Unassigned, ""},
		{"search-0 replaced beside a new pod", []*podresourcesv1.PodResources{search0, job1},
			uidSearch0, "search", uidNew, tenant.Unassigned, ""},
		{"two new pods beside another tenant's", []*podresourcesv1.PodResources{search0, job1, job2},
			uidJob, "batch", uidJob, tenant.Unassigned, ""},
		// job-1's process, or train-0's replacement's: batch either way
		{"a new pod beside its tenant's", []*podresourcesv1.PodResources{train0, job1},
			uidJob, "batch", uidJob, "batch", ""},
		// the metadata knows its pod UID: its pod, and its container there
		{"a known pod's process beside a known and a new pod", []*podresourcesv1.PodResources{search0, chat0, job2},
			uidSearch0, "search", uidSearch0, "search", "llm/search-0/triton"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &podsServer{}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			fk := &fakeKubelet{}
			fk.set(tc.holders...)
			socket, _ := serveKubelet(t, fk)
			cfg, err := tenant.ParseConfig("k.yaml", []byte(tenants))
			if err != nil {
				t.Fatal(err)
			}
			clk := gpu.NewManualClock(time.Unix(100, 0))
			b, m := newBuilder(t, cfg, "", kube.Options{PodResourcesSocket: socket, PodMetadata: hs.URL + "/pods", Clock: clk})
			on := func(uid string) *gpu.Readings {
				return &gpu.Readings{Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Up: true, Processes: []gpu.Process{
					{PID: 7, GPUInstanceID: -1, ComputeInstanceID: -1, UID: -1, Cgroup: podCgroup(uid)}}}}}
			}

			srv.set(http.StatusOK, podListJSON) // (the job pods not in it)
			b.Refresh(context.Background())
			if got := tenantsByKey(b.Build(on(tc.uidRead), gpu.SamplerStats{}))["GPU-a"]; got != tc.wantRead {
				t.Fatalf("metadata read: GPU-a -> %q, want %q", got, tc.wantRead)
			}

			srv.set(http.StatusServiceUnavailable, "")
			clk.Advance(10 * time.Second)
			b.Refresh(context.Background())
			if md := m.Status().Metadata; md.Up || md.ErrorsTotal != 1 {
				t.Fatalf("metadata status %+v, want down", md)
			}
			cg := kube.CgroupInfo{PodUID: tc.uidFailing}
			ref, _ := m.Mapping().ResolvePod(cg, "GPU-a")
			var gotPod string
			if ref != nil && ref.Name != "" {
				gotPod = ref.Namespace + "/" + ref.Name + "/" + ref.Container
			}
			if ref == nil || gotPod != tc.wantPod || ref.UID != tc.uidFailing {
				t.Errorf("metadata failing: resolved to %+v, want %q, pod UID %s", ref, tc.wantPod, tc.uidFailing)
			}
			if tc.wantPod != "" {
				// (its container named: no holders)
			} else if got := m.Mapping().Holders(cg, ref, 16, "GPU-a"); len(got) != len(tc.holders) {
				t.Errorf("metadata failing: holders %+v, want all %d", got, len(tc.holders))
			} else {
				for _, h := range got {
					if h.UID != tc.uidFailing {
						t.Errorf("metadata failing: holder %+v, want pod UID %s", h, tc.uidFailing)
					}
				}
			}
			if got := tenantsByKey(b.Build(on(tc.uidFailing), gpu.SamplerStats{}))["GPU-a"]; got != tc.wantFailing {
				t.Errorf("metadata failing: GPU-a -> %q, want %q", got, tc.wantFailing)
			}
		})
	}
}
