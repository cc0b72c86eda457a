package kube

import (
	"strings"
	"testing"
)

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope\n"))
	f.Add([]byte("12:memory:/kubepods/burstable/pod" + puid + "/" + cid + "\n1:name=systemd:/\n"))
	f.Add([]byte("3:cpu:/docker/" + cid + "\n"))
	f.Add([]byte("0::/system.slice/llm-a.service\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProcCgroup(data)
		if err != nil {
			return
		}
		info := ParseCgroupPath(p)
		if info.Path != p || (info.PodUID != "" && !strings.Contains(strings.ToLower(strings.ReplaceAll(p, "_", "-")), info.PodUID)) {
			t.Fatalf("%q -> %+v", p, info)
		}
		if info.ContainerID != "" && !strings.Contains(strings.ToLower(p), info.ContainerID) {
			t.Fatalf("%q -> %+v", p, info)
		}
		if u := SystemdService(p); u != "" && (strings.Contains(u, "/") || !strings.HasSuffix(u, ".service") || !strings.Contains(p, u)) {
			t.Fatalf("%q -> unit %q", p, u)
		}
	})
}

func FuzzParsePodList(f *testing.F) {
	f.Add([]byte(`{"items":[{"metadata":{"name":"a","namespace":"n","uid":"U","labels":{"x":"y"}},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://ab"}]}}]}`))
	f.Add([]byte(`{"items":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		metas, cids, err := parsePodList("f.json", data)
		if err != nil {
			return
		}
		for _, m := range metas {
			if m.UID == "" || m.Name == "" || m.UID != strings.ToLower(m.UID) {
				t.Fatalf("meta %+v", m)
			}
		}
		for id := range cids {
			if id == "" || strings.Contains(id, "://") {
				t.Fatalf("container id %q", id)
			}
		}
	})
}
