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
		ref, _ := m.ResolvePod(CgroupInfo{PodUID: uid, ContainerID: tc.id}, "GPU-a")
		if ref == nil || ref.Container != tc.want {
			t.Errorf("container %s: got %+v, want container %q", tc.id, ref, tc.want)
		}
	}
}

// A pod list's labels and container statuses are bounded pod by pod:
// one pod of more labels than a pod could need (a million, 12 MiB) keeps
// its name, namespace, UID and container IDs, none of its labels, and is
// said to be cut; one of more container statuses keeps the first; the
// other pods are read all the same (one tenant's pods made the whole
// node's metadata unreadable). Past the bound of all pods together, the
// pods keeping the most lose their labels first, wherever they lie in the
// list. Nothing takes a minute or hundreds of MiB (4 million labels took
// a minute of CPU and 480 MiB at every refresh).
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
	status := func(id int) string { return fmt.Sprintf(`{"name":"c%d","containerID":"containerd://%x"}`, id, id+0xab) }
	statuses := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = status(i)
		}
		return strings.Join(s, ",")
	}
	pod := func(name, labels, statuses string) string {
		return `{"metadata":{"name":"` + name + `","namespace":"n","uid":"u-` + name + `","labels":{` + labels + `}},"status":{"containerStatuses":[` + statuses + `]}}`
	}
	list := func(pods ...string) string { return `{"items":[` + strings.Join(pods, ",") + `]}` }
	// chat is the pod whose metadata another's must not cost
	chat := pod("chat", `"app":"chat"`, status(0))
	for _, tc := range []struct {
		name string
		list string
		want string // summarizePods
	}{
		{"one pod of a million labels", list(pod("p", labels(1_000_000), statuses(2)), chat),
			"p 0 2 cut\nchat 1 1\n"},
		{"ten pods of 10,001 labels each beside another's", list(append(podsOf(10, labels(10_001), status(0)), chat)...),
			"x 0 1 cut (x10)\nchat 1 1\n"},
		{"a pod of 1,000 labels, one of 1,001", list(pod("p", labels(maxPodLabels), ""), pod("q", labels(maxPodLabels+1), ""), chat),
			"p 1000 0\nq 0 0 cut\nchat 1 1\n"},
		{"a pod of 1,001 container statuses", list(pod("p", `"a":"b"`, statuses(maxPodStatuses+1)), chat),
			"p 1 1000 cut\nchat 1 1\n"},
		// 105,700 in all: 57 pods' labels go
		{"700 pods of 100 labels and 51 containers", list(podsOf(700, labels(100), statuses(51))...),
			"x 0 51 cut (x57)\nx 100 51 (x643)\n"},
		// a tenant's 200 pods of 999 labels, another's pod after them: the
		// first tenant's pods lose theirs, the other keeps its own
		{"200 pods of 999 labels before another's", list(append(podsOf(200, labels(999), ""), chat)...),
			"x 0 0 cut (x100)\nx 999 0 (x100)\nchat 1 1\n"},
		// no labels to give up: the statuses of the pods keeping the most, two
		// once the last pod is read
		{"101 pods of 1,000 container statuses and another's", list(append(podsOf(101, "", statuses(1000)), chat)...),
			"x 0 0 cut (x2)\nx 0 1000 (x99)\nchat 1 1\n"},
		{"items repeated", `{"items":[` + pod("p", labels(60_000), "") + `],"items":[` + pod("q", labels(600), "") + `]}`,
			"q 600 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			metas, _, err := parsePodList("pods.json", []byte(tc.list))
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got := summarizePods(metas); got != tc.want {
				t.Errorf("got:\n%swant:\n%s", got, tc.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 400<<20 || d > 20*time.Second {
				t.Errorf("read in %v with %d MiB allocated", d, alloc>>20)
			}
		})
	}
	for _, tc := range []struct{ name, list, err string }{
		{"labels not an object", `{"items":[{"metadata":{"labels":[1]}}]}`, "labels: not an object"},
		{"a label not a string", `{"items":[{"metadata":{"labels":{"a":1}}}]}`, `label "a"`},
		{"the mirror annotation not a string", `{"items":[{"metadata":{"annotations":{"kubernetes.io/config.mirror":1}}}]}`, "annotation kubernetes.io/config.mirror"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parsePodList("pods.json", []byte(tc.list)); err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "pods.json") {
				t.Fatalf("error %v, want one with %q naming the source", err, tc.err)
			}
		})
	}
}

// podsOf is n pods x0, x1, ... of the labels and statuses given.
func podsOf(n int, labels, statuses string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"metadata":{"name":"x%d","namespace":"n","uid":"u-x%d","labels":{%s}},"status":{"containerStatuses":[%s]}}`, i, i, labels, statuses)
	}
	return out
}

// summarizePods is, per pod, its name (x0, x1, ... as x), the labels and
// container IDs it keeps, and "cut" where the bounds cut it; pods alike
// as one line, with their count, in the order of the first.
func summarizePods(metas []*podMeta) string {
	var lines []string
	count := map[string]int{}
	for _, p := range metas {
		name := p.Name
		if strings.HasPrefix(name, "x") {
			name = "x"
		}
		l := fmt.Sprintf("%s %d %d", name, len(p.Labels), len(p.ContainerIDs))
		if p.clipped != "" {
			l += " cut"
		}
		if count[l]++; count[l] == 1 {
			lines = append(lines, l)
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if n := count[l]; n > 1 {
			fmt.Fprintf(&b, "%s (x%d)\n", l, n)
		} else {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
