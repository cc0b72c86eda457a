package kube

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope\n"))
	f.Add([]byte("12:memory:/kubepods/burstable/pod" + puid + "/" + cid + "\n1:name=systemd:/\n"))
	f.Add([]byte("3:cpu:/docker/" + cid + "\n"))
	f.Add([]byte("0::/system.slice/llm-a.service\n"))
	f.Add([]byte("0::/../../../burstable/pod" + puid + "/" + cid + "\n"))
	f.Add([]byte("0::/../../pod" + puid + "/crio-" + cid + "\n"))
	f.Add([]byte("0::/../../../../user.slice/user-1000.slice/user@1000.service/pod" + puid + "/" + cid + "\n"))
	f.Add([]byte("4:memory:/machine.slice\n1:name=systemd:/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope\n0::/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope/libvirt\n"))
	f.Add([]byte("0::/qemu.slice/100.scope\n"))
	f.Add([]byte("0::/kubepods/burstable/pod" + puid + "/" + cid + " (deleted)\n"))
	f.Add([]byte("4:memory:/kubepods/burstable/pod" + puid + "/" + cid + "\n1:name=systemd:/\n0::/system.slice/containerd.service\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProcCgroup(data)
		if err != nil {
			return
		}
		// a line that names a pod is never passed over for one that
		// names none (a hybrid host's unified line at "/")
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.SplitN(strings.TrimSpace(l), ":", 3); len(f) == 3 && ParseCgroupPath(f[2]).PodUID != "" && ParseCgroupPath(p).PodUID == "" {
				t.Fatalf("%q -> %q, no pod's", data, p)
			}
		}
		info := ParseCgroupPath(p)
		if info.Path != p || (info.PodUID != "" && !strings.Contains(strings.ToLower(strings.ReplaceAll(p, "_", "-")), info.PodUID)) {
			t.Fatalf("%q -> %+v", p, info)
		}
		// a pod is found under kubepods, or in a path relative to the
		// reader's cgroup namespace, where kubepods lies above it
		if info.PodUID != "" && !strings.Contains(p, "kubepods") && !strings.HasPrefix(p, "/../") {
			t.Fatalf("%q -> pod %q outside kubepods", p, info.PodUID)
		}
		if info.ContainerID != "" && !strings.Contains(strings.ToLower(p), info.ContainerID) {
			t.Fatalf("%q -> %+v", p, info)
		}
		if u := SystemdService(p); u != "" && (strings.Contains(u, "/") || !strings.HasSuffix(u, ".service") || !strings.Contains(p, u)) {
			t.Fatalf("%q -> unit %q", p, u)
		}
		if m := MachineScope(p); m != "" && (!strings.HasPrefix(p, m) || !strings.HasSuffix(m, ".scope") || len(p) > len(m) && p[len(m)] != '/') {
			t.Fatalf("%q -> machine scope %q", p, m)
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

// Whatever the kubelet's pod-resources answer holds, the device map names
// each container once per device, by its device's UUID without a replica
// suffix, and counts no more pods than the answer has.
func FuzzNewMapping(f *testing.F) {
	for _, resp := range []*podresourcesv1.ListPodResourcesResponse{
		manyPods(3),
		{PodResources: []*podresourcesv1.PodResources{{Name: "a", Namespace: "n", Containers: []*podresourcesv1.ContainerResources{
			{Name: "c", Devices: []*podresourcesv1.ContainerDevices{{DeviceIds: []string{"GPU-a::1", "GPU-a::2", "MIG-b"}}}},
			{Name: "n", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "intel.com/sriov_netdevice", DeviceIds: []string{"0000:3b:00.1"}}}},
			{Name: "i", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"0", "1::2", "0:1"}}}},
			{Name: "d", DynamicResources: []*podresourcesv1.DynamicResource{{ClaimResources: []*podresourcesv1.ClaimResource{
				{DeviceName: "gpu-0", CdiDevices: []*podresourcesv1.CDIDevice{{Name: "nvidia.com/gpu=GPU-a"}}}}}}},
		}}, nil}},
	} {
		data, err := proto.Marshal(resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp := &podresourcesv1.ListPodResourcesResponse{}
		if proto.Unmarshal(data, resp) != nil {
			return
		}
		m := NewMapping(resp)
		if m.Pods() > len(resp.GetPodResources()) {
			t.Fatalf("%d pods of an answer of %d", m.Pods(), len(resp.GetPodResources()))
		}
		seen := map[deviceRef]bool{}
		pods := map[string]bool{}
		for _, a := range m.Allocations() {
			k := deviceRef{a.Device, keyOf(a.Pod)}
			if a.Device == "" || strings.Contains(a.Device, "::") || seen[k] {
				t.Fatalf("allocation %+v (a device without its replica, once)", a)
			}
			seen[k] = true
			if !isDeviceUUID(a.Device) && !isIndexID(a.Device) {
				t.Fatalf("allocation %+v of a device that is no GPU", a)
			}
			pods[a.Pod.Namespace+"/"+a.Pod.Name] = true
			if on := m.PodsOn(a.Device, a.Device); len(on) != len(m.PodsOn(a.Device)) {
				t.Fatalf("PodsOn(%q) twice: %d containers, once: %d", a.Device, len(on), len(m.PodsOn(a.Device)))
			}
		}
		if m.Pods() != len(pods) {
			t.Fatalf("%d pods mapped, %d holding a GPU", m.Pods(), len(pods))
		}
		for _, u := range m.Unmapped() {
			if !nvidiaResource(u.Resource) || len(u.IDs) == 0 || len(u.IDs) > maxUnmappedIDs {
				t.Fatalf("unmapped %+v", u)
			}
		}
	})
}

func TestParseBearerToken(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"eyJhbGciOi.eyJpc3Mi.c2ln\n", "eyJhbGciOi.eyJpc3Mi.c2ln", ""},
		{"  tok  \r\n", "tok", ""},
		{"", "", "empty"},
		{" \n\t", "", "empty"},
		{"a\nb", "", "more than one line"},
		{"a b", "", "byte 2 is 0x20"},
		{"a\tb", "", "byte 2 is 0x09"},
		{"a\x00b", "", "byte 2 is 0x00"},
		{"t\xc3\xa9", "", "byte 2 is 0xc3"},
	} {
		got, err := parseBearerToken("tok.txt", []byte(tc.in))
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "tok.txt")):
			t.Errorf("%q: %q, %v; want an error naming the file and saying %q", tc.in, got, err, tc.err)
		}
	}
}

// A token read goes into an Authorization header as it is.
func FuzzParseBearerToken(f *testing.F) {
	f.Add([]byte("eyJhbGciOi.eyJpc3Mi.c2ln\n"))
	f.Add([]byte("a b\n"))
	f.Add([]byte("a\x00b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := parseBearerToken("f", b)
		if err != nil {
			return
		}
		if tok == "" || strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			t.Fatalf("%q -> token %q", b, tok)
		}
	})
}

// A kubelet address taken gives the https URL of its /pods, which a pod
// metadata URL may be.
func FuzzKubeletPodsURL(f *testing.F) {
	for _, s := range []string{"10.0.0.5", "fd00:10:244::5", "[fd00::5]:10443", "node-1:10250", "[10.0.0.5]", "node/x", "user@node", "node?x", ":10250", "10.0.0.5:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		u, err := KubeletPodsURL(addr)
		if err != nil {
			if !strings.Contains(err.Error(), "kubelet address") {
				t.Fatalf("%q: %v (the error says what it is of)", addr, err)
			}
			return
		}
		p, perr := url.Parse(u)
		if perr != nil || p.Scheme != "https" || p.Path != "/pods" || p.RawQuery != "" || p.Fragment != "" || p.User != nil || p.Hostname() == "" || CheckPodMetadataURL(u) != nil {
			t.Fatalf("%q -> %q (%v)", addr, u, perr)
		}
	})
}

// A pod metadata URL taken can be requested: http(s), a host, a port from
// 1 to 65535.
func FuzzCheckPodMetadataURL(f *testing.F) {
	for _, s := range []string{"https://10.0.0.5:10250/pods", "http://node/pods", "https://fd00:10:244::5:10250/pods", "https://:10250/pods", "http://node:70000/pods", "ftp://node/x", "https://[fd00::5]:10250/pods"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if err := CheckPodMetadataURL(src); err != nil {
			if !strings.Contains(err.Error(), "pod metadata URL") {
				t.Fatalf("%q: %v (the error names the URL)", src, err)
			}
			return
		}
		u, err := url.Parse(src)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			t.Fatalf("%q taken: %+v, %v", src, u, err)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				t.Fatalf("%q taken with port %q", src, p)
			}
		}
	})
}
