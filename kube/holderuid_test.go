package kube_test

import (
	"fmt"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// TestResolvePodByDevice: rule 2 under a cgroup's pod UID says so; rule
// 1, a pod known by its UID only and a process of no pod UID do not.
func TestResolvePodByDevice(t *testing.T) {
	resp := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("llm", "chat-0", "server", "nvidia.com/gpu", "GPU-a"),
		pod("llm", "a", "c", "nvidia.com/gpu.shared", "GPU-b::0"),
		pod("llm", "b", "c", "nvidia.com/gpu.shared", "GPU-b::1"),
	}}
	meta := `{"items":[{"metadata":{"name":"chat-0","namespace":"llm","uid":"` + uidChat + `"}}]}`
	withMeta, err := kube.NewMappingWithMetadata(resp, "test", []byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	const uidEvil = "deadbeef-0000-4000-8000-000000000001"
	for _, tc := range []struct {
		name   string
		m      *kube.Mapping
		cg     kube.CgroupInfo
		device string
		want   string
	}{
		{"rule 2 under a cgroup UID", kube.NewMapping(resp), kube.ParseCgroupPath(podCgroup(uidEvil)), "GPU-a", "llm/chat-0 " + uidEvil + " true"},
		{"rule 2 of no cgroup UID", kube.NewMapping(resp), kube.CgroupInfo{}, "GPU-a", "llm/chat-0  false"},
		{"rule 1", withMeta, kube.ParseCgroupPath(podCgroup(uidChat)), "GPU-a", "llm/chat-0 " + uidChat + " false"},
		{"the metadata knows the holder by another UID", withMeta, kube.ParseCgroupPath(podCgroup(uidEvil)), "GPU-a", "/ " + uidEvil + " false"},
		{"two pods hold the GPU", kube.NewMapping(resp), kube.ParseCgroupPath(podCgroup(uidEvil)), "GPU-b", "/ " + uidEvil + " false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, byDevice := tc.m.ResolvePodByDevice(tc.cg, tc.device)
			if got := fmt.Sprintf("%s/%s %s %v", ref.Namespace, ref.Name, ref.UID, byDevice); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHolderUIDs: a pod that processes are placed in by their GPU alone
// keeps one cgroup pod UID from sample to sample. Processes of two UIDs in
// one pod at once are none of them its, but for the one it was bound to,
// still running; a pod replaced under its name (its processes gone) is
// bound to its new UID.
func TestHolderUIDs(t *testing.T) {
	const (
		victim = "11111111-1111-4111-8111-111111111111"
		evil   = "deadbeef-0000-4000-8000-000000000001"
		next   = "22222222-2222-4222-8222-222222222222"
	)
	chat := func(uid, dev string) kube.HolderClaim {
		return kube.HolderClaim{Namespace: "llm", Name: "chat-0", UID: uid, Device: dev}
	}
	other := func(uid string) kube.HolderClaim {
		return kube.HolderClaim{Namespace: "llm", Name: "embed-0", UID: uid, Device: "GPU-c"}
	}
	for _, tc := range []struct {
		name    string
		samples [][]kube.HolderClaim
		want    []string // each sample's refused, then its contests
	}{
		{"two containers of one pod, a cgroup UID",
			[][]kube.HolderClaim{{chat(victim, "GPU-a"), chat(victim, "GPU-a"), chat(victim, "GPU-b")}},
			[]string{"[false false false] []"}},
		{"two UIDs at once, none bound: neither",
			[][]kube.HolderClaim{{chat(victim, "GPU-a"), chat(evil, "GPU-a")}},
			[]string{"[true true] [llm/chat-0 " + victim + "," + evil + " GPU-a kept=]"}},
		{"the bound UID still running keeps the pod",
			[][]kube.HolderClaim{{chat(victim, "GPU-a")}, {chat(evil, "GPU-a"), chat(victim, "GPU-a")}, {chat(victim, "GPU-a"), chat(evil, "GPU-b")}},
			[]string{"[false] []",
				"[true false] [llm/chat-0 " + victim + "," + evil + " GPU-a kept=" + victim + "]",
				"[false true] [llm/chat-0 " + victim + "," + evil + " GPU-a,GPU-b kept=" + victim + "]"}},
		{"replaced under its name: the old UID's processes gone",
			[][]kube.HolderClaim{{chat(victim, "GPU-a")}, {chat(next, "GPU-a")}, {chat(next, "GPU-a")}},
			[]string{"[false] []", "[false] []", "[false] []"}},
		{"two UIDs at once, then one: it is bound",
			[][]kube.HolderClaim{{chat(victim, "GPU-a"), chat(evil, "GPU-a")}, {chat(victim, "GPU-a")}, {chat(victim, "GPU-a"), chat(evil, "GPU-a")}},
			[]string{"[true true] [llm/chat-0 " + victim + "," + evil + " GPU-a kept=]", "[false] []",
				"[false true] [llm/chat-0 " + victim + "," + evil + " GPU-a kept=" + victim + "]"}},
		{"holders apart",
			[][]kube.HolderClaim{{chat(victim, "GPU-a"), other(evil)}, {other(evil), chat(victim, "GPU-a")}},
			[]string{"[false false] []", "[false false] []"}},
		{"none", [][]kube.HolderClaim{nil}, []string{"[] []"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h kube.HolderUIDs
			for i, claims := range tc.samples {
				refused, contests := h.Settle(claims)
				var cs []string
				for _, c := range contests {
					cs = append(cs, fmt.Sprintf("%s/%s %s %s kept=%s", c.Namespace, c.Name, strings.Join(c.UIDs, ","), strings.Join(c.Devices, ","), c.Kept))
				}
				if got := fmt.Sprint(refused, " ", "[", strings.Join(cs, " "), "]"); got != tc.want[i] {
					t.Errorf("sample %d: %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}
