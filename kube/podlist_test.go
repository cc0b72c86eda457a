package kube

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestParsePodListErrors(t *testing.T) {
	if _, _, err := parsePodList("x.json", []byte("{not json")); err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Errorf("err = %v", err)
	}
}

// A process of an init container (a restartable one, a sidecar, included)
// or of an ephemeral container is named by its own container, not by the
// one container of its pod that holds the GPU.
func TestResolvePodInitAndEphemeralContainers(t *testing.T) {
	const uid = "0c8d2f6e-71b5-4a9d-8e3f-2a6b9c4d1e57"
	const app, warm, side, debug = "aaaa01", "bbbb02", "cccc03", "dddd04"
	meta := `{"items":[{"metadata":{"name":"p","namespace":"llm","uid":"` + uid + `"},"status":{` +
		`"containerStatuses":[{"name":"app","containerID":"containerd://` + app + `"}],` +
		`"initContainerStatuses":[{"name":"warmup","containerID":"containerd://` + warm + `"},{"name":"proxy","containerID":"cri-o://` + side + `"}],` +
		`"ephemeralContainerStatuses":[{"name":"debugger","containerID":"containerd://` + debug + `"}]}}]}`
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Namespace: "llm", Name: "p",
		Containers: []*podresourcesv1.ContainerResources{{Name: "app", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a"}}}}}}}}
	m, err := NewMappingWithMetadata(resp, "pods.json", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, want string }{{app, "app"}, {warm, "warmup"}, {side, "proxy"}, {debug, "debugger"}} {
		ref := m.ResolvePod(CgroupInfo{PodUID: uid, ContainerID: tc.id}, "GPU-a")
		if ref == nil || ref.Container != tc.want {
			t.Errorf("container %s: got %+v, want container %q", tc.id, ref, tc.want)
		}
	}
}

// A pod list of more labels and container statuses than a node's pods
// could have is refused at once, naming the source, without decoding them
// all: 4 million labels (60 MiB, one pod or many) took a minute of CPU and
// 480 MiB of heap at every refresh. The limit itself passes.
func TestPodListEntriesBounded(t *testing.T) {
	labels := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":"v"`, i)
		}
		return b.String()
	}
	pod := func(name, labels, statuses string) string {
		return `{"metadata":{"name":"` + name + `","namespace":"n","uid":"u-` + name + `","labels":{` + labels + `}},"status":{"containerStatuses":[` + statuses + `]}}`
	}
	status := `{"name":"c","containerID":"containerd://ab"}`
	big := `{"items":[` + pod("p", labels(1_000_000), "") + `]}`
	many := make([]string, 0, 700)
	for i := range 700 {
		many = append(many, pod(fmt.Sprint("p", i), labels(100), strings.Repeat(status+",", 50)+status))
	}
	atLimit := `{"items":[` + pod("p", labels(maxPodListEntries-3), status+","+status) + `,` + pod("q", "", status) + `]}`
	for _, tc := range []struct{ name, list, err string }{
		{"one pod of a million labels", big, "more than 100000 labels and container statuses"},
		{"700 pods of 100 labels and 51 containers", `{"items":[` + strings.Join(many, ",") + `]}`, "more than 100000 labels and container statuses"},
		{"at the limit", atLimit, ""},
		{"items repeated, each under the limit", `{"items":[` + pod("p", labels(60_000), "") + `],"items":[` + pod("q", labels(60_000), "") + `]}`, "more than 100000 labels and container statuses"},
		{"labels not an object", `{"items":[{"metadata":{"labels":[1]}}]}`, "labels: not an object"},
		{"a label not a string", `{"items":[{"metadata":{"labels":{"a":1}}}]}`, `label "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			metas, _, err := parsePodList("pods.json", []byte(tc.list))
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if tc.err == "" {
				if err != nil || len(metas) != 2 || len(metas[0].Labels) != maxPodListEntries-3 {
					t.Fatalf("%d pods, error %v", len(metas), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "pods.json") {
				t.Fatalf("error %v, want one with %q naming the source", err, tc.err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
				t.Errorf("refused after %v and %d MiB allocated", d, alloc>>20)
			}
		})
	}
}

// A pod list is decoded where it lies: a pod of 32 MiB of fields that are
// not read costs no copy of them (a decoder's buffer held it whole, twice
// its size, on top of the body).
func TestPodListDecodedInPlace(t *testing.T) {
	list := []byte(`{"items":[{"metadata":{"name":"p","namespace":"n","uid":"u","labels":{"a":"b"}},"spec":{"junk":"` + strings.Repeat("x", 32<<20) + `"},` +
		`"status":{"containerStatuses":[{"name":"c","containerID":"containerd://ab","state":"` + strings.Repeat("y", 1<<20) + `"}]}}]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	metas, cids, err := parsePodList("pods.json", list)
	runtime.ReadMemStats(&after)
	if err != nil || len(metas) != 1 || metas[0].Labels["a"] != "b" || cids["ab"] != "c" {
		t.Fatalf("pods %v, containers %v, error %v", metas, cids, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("%d MiB allocated to decode a 33 MiB list", alloc>>20)
	}
}
