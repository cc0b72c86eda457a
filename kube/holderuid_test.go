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
func TestResolvePod(t *testing.T) {
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
			ref, byDevice := tc.m.ResolvePod(tc.cg, tc.device)
			if got := fmt.Sprintf("%s/%s %s %v", ref.Namespace, ref.Name, ref.UID, byDevice); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHolderUIDs: pods that processes are placed among by their GPU alone
// keep as many cgroup pod UIDs as they are pods, from sample to sample.
// UIDs new in a sample that do not all fit beside those still running are
// none of them a holder's; a pod replaced under its name (its processes
// gone) is bound to its new UID.
func TestHolderUIDs(t *testing.T) {
	const (
		victim = "11111111-1111-4111-8111-111111111111"
		evil   = "deadbeef-0000-4000-8000-000000000001"
		next   = "22222222-2222-4222-8222-222222222222"
		second = "33333333-3333-4333-8333-333333333333"
	)
	chat := func(uid, dev string) kube.HolderClaim {
		return kube.HolderClaim{Pods: []string{"llm/chat-0"}, UID: uid, Device: dev}
	}
	other := func(uid string) kube.HolderClaim {
		return kube.HolderClaim{Pods: []string{"llm/embed-0"}, UID: uid, Device: "GPU-c"}
	}
	// two pods on replicas of one GPU
	shared := func(uid string) kube.HolderClaim {
		return kube.HolderClaim{Pods: []string{"llm/a", "llm/b"}, UID: uid, Device: "GPU-s"}
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
		{"two pods sharing a GPU, their two UIDs, then a third's",
			[][]kube.HolderClaim{{shared(victim), shared(second)}, {shared(victim), shared(evil), shared(second)}},
			[]string{"[false false] []",
				"[false true false] [llm/a,llm/b " + victim + "," + second + "," + evil + " GPU-s kept=" + victim + "," + second + "]"}},
		{"two pods sharing a GPU, one's UID running, two new at once: neither",
			[][]kube.HolderClaim{{shared(victim)}, {shared(victim), shared(evil), shared(second)}, {shared(victim), shared(second)}},
			[]string{"[false] []",
				"[false true true] [llm/a,llm/b " + victim + "," + second + "," + evil + " GPU-s kept=" + victim + "]",
				"[false false] []"}},
		{"none", [][]kube.HolderClaim{nil}, []string{"[] []"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h kube.HolderUIDs
			for i, claims := range tc.samples {
				refused, contests := h.Settle(claims)
				var cs []string
				for _, c := range contests {
					cs = append(cs, fmt.Sprintf("%s %s %s kept=%s", strings.Join(c.Pods, ","), strings.Join(c.UIDs, ","), strings.Join(c.Devices, ","), strings.Join(c.Kept, ",")))
				}
				if got := fmt.Sprint(refused, " ", "[", strings.Join(cs, " "), "]"); got != tc.want[i] {
					t.Errorf("sample %d: %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}
