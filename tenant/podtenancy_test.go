package tenant

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

func TestParsePodTenancy(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    PodTenancy
		wantErr string
	}{
		{"namespace", PodTenancy{ByNamespace: true}, ""},
		{"off", PodTenancy{}, ""},
		{"label:team", PodTenancy{Label: "team"}, ""},
		{"label:app.kubernetes.io/part-of", PodTenancy{Label: "app.kubernetes.io/part-of"}, ""},
		{"label:", PodTenancy{}, "not a pod label key"},
		{"label:a b", PodTenancy{}, "not a pod label key"},
		{"label:/x", PodTenancy{}, "not a pod label key"},
		{"label:example..com/x", PodTenancy{}, "not a pod label key"},
		{"label:example.-com/x", PodTenancy{}, "not a pod label key"},
		// the longest prefix and name a label key may have, and one byte more
		{"label:" + strings.Repeat("a", 253) + "/" + strings.Repeat("b", 63), PodTenancy{Label: strings.Repeat("a", 253) + "/" + strings.Repeat("b", 63)}, ""},
		{"label:" + strings.Repeat("b", 64), PodTenancy{}, "not a pod label key"},
		{"label:" + strings.Repeat("a", 254) + "/b", PodTenancy{}, "not a pod label key"},
		{"pod", PodTenancy{}, "not one of namespace, label:KEY, off"},
		{"", PodTenancy{}, "not one of"},
	} {
		got, err := ParsePodTenancy(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("%q reads back as %q", tc.in, got.String())
		}
	}
}

func TestPodTenantName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"team-a", "team-a"},
		{"kube-system", "kube-system"},
		{"My_App.v2", "My_App.v2"}, // a label value
		{"llama_7b", "llama_7b"},   // reads like the escape of "{", a label value all the same
		{"unassigned_", "unassigned_"},
		{"_x", "_x"},
		{"", Unassigned},
		{Unassigned, "_00unassigned"},
		{"a/b", "_00a_2fb"},
		{"a b:c", "_00a_20b_3ac"},
		{"é", "_00_c3_a9"},
		{"a_b/c", "_00a_5fb_2fc"},
		{"_00x", "_00_5f00x"}, // a valid name that begins as a spelt-out one
		// never read as a flag by a hook the tenant's name is handed to
		{"-rf", "_00-rf"},
		{"--help", "_00--help"},
		{"a-", "a-"},
		// longer than a tenant's name may be (no Kubernetes value is; a pod
		// metadata file may say anything): the name of every series
		{strings.Repeat("a", maxNameLen), strings.Repeat("a", maxNameLen)},
		{strings.Repeat("a", maxNameLen+1), Unassigned},
		{strings.Repeat("a", 1<<20), Unassigned},
		{strings.Repeat("/", maxNameLen/3-1), "_00" + strings.Repeat("_2f", maxNameLen/3-1)},
		{strings.Repeat("/", maxNameLen/3), Unassigned},
		{strings.Repeat("/", maxNameLen), Unassigned},
	} {
		got := PodTenantName(tc.in)
		if got != tc.want {
			t.Errorf("PodTenantName(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got != Unassigned && !validName(got) {
			t.Errorf("PodTenantName(%q) = %q is not a valid tenant name", tc.in, got)
		}
	}
}

// Two values never share a tenant, unless both are Unassigned's.
func TestPodTenantNameDistinct(t *testing.T) {
	for _, pair := range [][2]string{
		{Unassigned, "unassigned_"},
		{"a/b", "a_2fb"},
		{"a_2fb/", "a/b/"},
		{"a b", "a_20b"},
		{"\x00x", "_00x"},
		{"_00a_2fb", "a/b"},
	} {
		if a, b := PodTenantName(pair[0]), PodTenantName(pair[1]); a == b {
			t.Errorf("%q and %q are both tenant %q", pair[0], pair[1], a)
		}
	}
}

// podUID is the UID of the test pod named name.
func podUID(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%08x-0000-4000-8000-000000000000", h.Sum32())
}

// podsOn maps pods to GPUs: each entry is "namespace/name=GPU-UUID", with
// the pod's UID podUID(name) and labels team=<namespace>-team in the pod
// metadata.
func podsOn(t *testing.T, entries ...string) *kube.Mapping {
	t.Helper()
	resp := &podresourcesv1.ListPodResourcesResponse{}
	var items []string
	for _, e := range entries {
		pod, dev, _ := strings.Cut(e, "=")
		ns, name, _ := strings.Cut(pod, "/")
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{Name: name, Namespace: ns,
			Containers: []*podresourcesv1.ContainerResources{{Name: "main",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{dev}}}}}})
		items = append(items, fmt.Sprintf(`{"metadata":{"name":%q,"namespace":%q,"uid":%q,"labels":{"team":"%s-team"}}}`, name, ns, podUID(name), ns))
	}
	m, err := kube.NewMappingWithMetadata(resp, "pods.json", []byte(`{"items":[`+strings.Join(items, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// podProc is a process of the pod named name (its cgroup names the pod's
// UID).
func podProc(pid uint32, name string, sm float64) gpu.Process {
	p := testutil.MIGProc(pid, "python", -1)
	p.Cgroup = "/kubepods/burstable/pod" + podUID(name) + "/0123456789abcdef"
	p.SMUtil = gpu.Float(sm)
	p.UsedMemoryBytes = gpu.Uint(gib)
	return p
}

// TestPodTenancy: pods that no tenant of the file matches go to the tenant
// the pod tenancy names; a pod a selector matches to the file's tenant;
// a process whose cgroup names a service or a login session is no pod's,
// on a pod's GPU too; the figures of each GPU still add up to the
// device's.
func TestPodTenancy(t *testing.T) {
	// GPU-0 exclusive to llm/chat; GPU-1 shared by batch/train and
	// research/probe (time-slicing replicas).
	pods := podsOn(t, "llm/chat=GPU-0", "batch/train=GPU-1::1", "research/probe=GPU-1::2")
	chat := podProc(10, "chat", 0.5)
	train := podProc(11, "train", 0.6)
	probe := podProc(12, "probe", 0.2)
	host := testutil.MIGProc(13, "python", -1) // no pod
	host.Cgroup = "/system.slice/job.service"
	host.SMUtil = gpu.Float(0.1)
	// a host user's login session on llm/chat's GPU (the device files are
	// open to every user): no pod's, though one pod alone holds the GPU
	session := testutil.MIGProc(14, "python", -1)
	session.Cgroup = "/user.slice/user-1000.slice/session-3.scope"
	session.SMUtil = gpu.Float(0.1)
	readings := func() *gpu.Readings {
		d0 := testutil.Device(0, "GPU-0", chat, session)
		d0.Activity.SMActive = gpu.Float(0.4)
		d1 := testutil.Device(1, "GPU-1", train, probe, host)
		d1.Mode = gpu.SharingTimeSlice
		d1.Activity.SMActive = gpu.Float(0.9)
		d1.Activity.DRAMActive = gpu.Float(0.3)
		return &gpu.Readings{Devices: []gpu.Device{d0, d1}}
	}
	const file = `tenants:
  - name: trainer
    class: batch
    selectors: [{kubernetes: {namespace: batch, pod: "train*"}}]
`
	for _, tc := range []struct {
		name    string
		file    string
		tenancy PodTenancy
		// tenant of chat, train, probe
		want    [3]string
		tenants string // snapshot's tenants with their classes
	}{
		{"no file, by namespace", "", PodTenancy{ByNamespace: true}, [3]string{"llm", "batch", "research"},
			"batch:best-effort llm:best-effort research:best-effort"},
		{"no file, off", "", PodTenancy{}, [3]string{Unassigned, Unassigned, Unassigned}, ""},
		{"no file, by label", "", PodTenancy{Label: "team"}, [3]string{"llm-team", "batch-team", "research-team"},
			"batch-team:best-effort llm-team:best-effort research-team:best-effort"},
		{"file overrides", file, PodTenancy{ByNamespace: true}, [3]string{"llm", "trainer", "research"},
			"trainer:batch llm:best-effort research:best-effort"},
		{"file, off", file, PodTenancy{}, [3]string{Unassigned, "trainer", Unassigned}, "trainer:batch"},
		// a namespace named like a tenant of the file is that tenant
		{"namespace named in the file", `tenants:
  - name: research
    class: latency
    selectors: [{executable: nothing-runs-this}]
`, PodTenancy{ByNamespace: true}, [3]string{"llm", "batch", "research"}, "research:latency batch:best-effort llm:best-effort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, tc.file, BuilderOptions{Pods: fixedPods{pods}, PodTenancy: tc.tenancy})
			r := readings()
			s := b.Build(r, gpu.SamplerStats{})
			got := map[uint32]string{}
			sums := map[string]float64{}
			for _, u := range s.Usage {
				for _, pid := range u.PIDs {
					got[pid] = u.Tenant
				}
				if u.SMActive != nil {
					sums[u.UUID] += *u.SMActive
				}
			}
			for i, pid := range []uint32{10, 11, 12} {
				if got[pid] != tc.want[i] {
					t.Errorf("pid %d: tenant %q, want %q (usage %+v)", pid, got[pid], tc.want[i], s.Usage)
				}
			}
			for _, pid := range []uint32{13, 14} {
				if got[pid] != Unassigned {
					t.Errorf("pid %d, of no pod, went to %q, want %s", pid, got[pid], Unassigned)
				}
			}
			for _, d := range r.Devices {
				if math.Abs(sums[d.UUID]-*d.Activity.SMActive) > 1e-9 {
					t.Errorf("%s: tenants' SM active adds up to %v, the device's is %v", d.UUID, sums[d.UUID], *d.Activity.SMActive)
				}
			}
			var tenants []string
			for _, in := range s.Tenants {
				tenants = append(tenants, in.Name+":"+string(in.Class))
			}
			if strings.Join(tenants, " ") != tc.tenants {
				t.Errorf("snapshot tenants %q, want %q", strings.Join(tenants, " "), tc.tenants)
			}
			for _, u := range s.Usage {
				if want := s.classOfInfo(u.Tenant); u.Class != want {
					t.Errorf("usage of %s has class %q, its tenant %q", u.Tenant, u.Class, want)
				}
			}
		})
	}
}

// classOfInfo is the class Tenants gives name; "" for Unassigned.
func (s *Snapshot) classOfInfo(name string) gpu.TenantClass {
	for _, in := range s.Tenants {
		if in.Name == name {
			return in.Class
		}
	}
	return ""
}

// TestPodTenancyConflictStaysUnassigned: a pod that two tenants of the
// file match is a conflict, reported under Unassigned, not given to its
// namespace.
func TestPodTenancyConflictStaysUnassigned(t *testing.T) {
	pods := podsOn(t, "llm/chat=GPU-0")
	chat := podProc(10, "chat", 0.5)
	const file = `tenants:
  - name: a
    selectors: [{kubernetes: {namespace: llm}}]
  - name: b
    selectors: [{kubernetes: {pod: "chat"}}]
`
	cfg, err := ParseConfig("t.yaml", []byte(file))
	if err != nil {
		// the overlap check refuses provable overlaps; this one is not
		t.Fatal(err)
	}
	b, err := NewBuilder(cfg, BuilderOptions{Pods: fixedPods{pods}, PodTenancy: PodTenancy{ByNamespace: true}})
	if err != nil {
		t.Fatal(err)
	}
	s := b.Build(&gpu.Readings{Devices: []gpu.Device{testutil.Device(0, "GPU-0", chat)}}, gpu.SamplerStats{})
	if u := usageOf(t, s, Unassigned, ""); u.Processes != 1 || s.Attribution.Conflicts != 1 {
		t.Errorf("usage %+v, conflicts %d; want the process unassigned as a conflict", s.Usage, s.Attribution.Conflicts)
	}
}
