package kube

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// PodRef is a pod (and container) that a process or device belongs to.
type PodRef struct {
	Namespace string
	Name      string
	UID       string // "" when only pod-resources named the pod
	Container string
	Labels    map[string]string // nil without pod metadata
}

// Mapping is one consistent view of which pods hold which devices.
type Mapping struct {
	// byDevice maps a device ID with any "::<replica>" suffix removed (GPU
	// UUID, MIG UUID, or a GPU's index, GPUIndexID) to the containers
	// holding it.
	byDevice map[string][]PodRef
	// meta is pod metadata by UID, from the optional metadata provider.
	meta map[string]*podMeta
	// metaByName is the same keyed "namespace/name".
	metaByName map[string]*podMeta
	// metaStale is true when the pod metadata is the last good read's, the
	// latest read having failed: a pod it knows by a UID other than a
	// process's cgroup may since have been replaced by one of the same name
	// (a StatefulSet's), the process's.
	metaStale bool
	// containerByID maps a container ID to the container name.
	containerByID map[string]string
	pods          int
	// unmapped are NVIDIA's resources whose device IDs name no GPU
	unmapped []UnmappedDevices
	// oversized counts the containers and device IDs left out for names
	// longer than Kubernetes allows; oversizedFirst names the first.
	oversized      int
	oversizedFirst string

	// allocs is Allocations' answer, made at its first call: the mapping
	// does not change once built.
	allocsOnce sync.Once
	allocs     []Allocation
}

type podMeta struct {
	Namespace, Name, UID string
	Labels               map[string]string
	ContainerIDs         []string // its containers' IDs, lower case
	// mirrorOf is, for the API server's mirror of a static pod, the static
	// pod's UID (its manifest's hash, lower case), which its cgroup names
	mirrorOf string
	// clipped says what of the pod's labels and container statuses the
	// pod list's bounds did not keep; "" for none
	clipped string
}

// deviceBase strips the shared-replica suffix the NVIDIA device plugin adds
// to time-sliced and MPS replicas ("GPU-abc::3" -> "GPU-abc").
func deviceBase(id string) string {
	if i := strings.Index(id, "::"); i >= 0 {
		return id[:i]
	}
	return id
}

// nvidiaResource says whether a device plugin resource is NVIDIA's
// (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb, ...).
func nvidiaResource(name string) bool {
	return strings.HasPrefix(name, "nvidia.com/")
}

// GPUIndexID is the device ID NVIDIA's device plugin gives the GPU of
// NVML index i under deviceIDStrategy=index ("0"; its time-slicing and
// MPS replicas "0::1"): the mapping holds such devices under it.
func GPUIndexID(i int) string { return strconv.Itoa(i) }

// isIndexID says whether id is a GPU's index as GPUIndexID writes it.
func isIndexID(id string) bool {
	i, err := strconv.Atoi(id)
	return err == nil && i >= 0 && i < 1<<16 && GPUIndexID(i) == id
}

// gpuDevice is the device ID under which the mapping holds a device that
// a device plugin's resource gave, its replica suffix removed: a GPU or
// MIG UUID of any resource, a GPU's index of NVIDIA's; "" for any other
// (a NIC's, an FPGA's, a MIG device NVIDIA's plugin names by index,
// "0:1").
func gpuDevice(resource, id string) string {
	base := deviceBase(id)
	if isDeviceUUID(base) || nvidiaResource(resource) && isIndexID(base) {
		return base
	}
	return ""
}

// UnmappedDevices are devices of one of NVIDIA's device plugin resources
// that the mapping cannot tie to a GPU: neither a GPU or MIG UUID nor a
// GPU's index (the plugin's MIG devices under deviceIDStrategy=index,
// "<GPU index>:<MIG index>"). Their containers are not mapped.
type UnmappedDevices struct {
	Resource string
	// IDs are the first few such IDs, as the kubelet gave them.
	IDs []string
}

// maxUnmappedIDs bounds UnmappedDevices.IDs: they are for a log line.
const maxUnmappedIDs = 4

// The longest names Kubernetes allows: a namespace and a container name
// are DNS labels, a pod name a DNS subdomain. A device ID is a GPU or MIG
// UUID, an index, or a DRA device's name, well under maxDeviceIDLen. A
// pod-resources answer naming one longer (only a broken kubelet can) has
// it left out: every name is a label of a pod info series, and a log line.
const (
	maxNamespaceLen = 63
	maxPodNameLen   = 253
	maxContainerLen = 63
	maxDeviceIDLen  = 256
)

// idFits says whether a device ID is within maxDeviceIDLen; one that is
// not is counted (oversize) and left out.
func (m *Mapping) idFits(id string) bool {
	if len(id) > maxDeviceIDLen {
		m.oversize("device ID " + id)
		return false
	}
	return true
}

// oversize notes a container or device ID left out, what names it being
// clipped for a log line.
func (m *Mapping) oversize(what string) {
	if m.oversized++; m.oversized == 1 {
		m.oversizedFirst = clip.Text(what, 120)
	}
}

// Oversized is how many containers and device IDs the answer named with a
// name longer than Kubernetes allows, left out of the mapping, and the
// first of them (clipped); 0 and "" for none (m may be nil).
func (m *Mapping) Oversized() (int, string) {
	if m == nil {
		return 0, ""
	}
	return m.oversized, m.oversizedFirst
}

// maxAnswerDeviceIDs bounds the GPU device IDs of a pod-resources answer,
// all its containers together: each becomes a container's hold on a
// device of the mapping, a hundred bytes or more from a dozen of the
// answer, so an answer of 15 MiB of short IDs (1.4 million, within gRPC's
// 16 MiB) was held as 176 MiB, built in seconds of CPU with 787 MiB
// allocated, at every refresh. A node's containers hold a few hundred (8
// GPUs of 48 time-slicing replicas each: 384). The IDs of other devices,
// which the mapping leaves out, are not counted: a device plugin may give
// one per unit of a resource (a MiB of memory, a CPU core), thousands to a
// pod.
const maxAnswerDeviceIDs = 100_000

// answerDeviceIDs counts the device IDs of a pod-resources answer that the
// mapping would hold, all its containers together: those of device
// plugins that name a GPU or MIG device (gpuDevice), and the device and
// CDI device names of dynamic resource allocation that are a UUID
// (draDeviceIDs).
func answerDeviceIDs(resp *podresourcesv1.ListPodResourcesResponse) int {
	n := 0
	for _, pr := range resp.GetPodResources() {
		for _, c := range pr.GetContainers() {
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					if len(id) <= maxDeviceIDLen && gpuDevice(d.GetResourceName(), id) != "" {
						n++
					}
				}
			}
			for _, dr := range c.GetDynamicResources() {
				for _, cr := range dr.GetClaimResources() {
					if isDeviceUUID(cr.GetDeviceName()) {
						n++
					}
					for _, cdi := range cr.GetCdiDevices() {
						if isDeviceUUID(cdiDeviceName(cdi.GetName())) {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

// NewMapping builds the device map from a pod-resources List answer:
// devices of device plugins that are GPUs or MIG devices (see gpuDevice),
// and devices of dynamic resource allocation named by their UUID (see
// draDeviceIDs). Only pods holding one of those count in Pods: a pod
// holding only a NIC, say, holds no GPU. Its cost grows with the answer's
// device IDs, which the Mapper bounds (maxAnswerDeviceIDs).
func NewMapping(resp *podresourcesv1.ListPodResourcesResponse) *Mapping {
	m := &Mapping{byDevice: map[string][]PodRef{}}
	pods := map[string]bool{}
	seen := map[deviceRef]bool{} // (a set: an answer may hold many pods)
	unmapped := map[string]*UnmappedDevices{}
	for _, pr := range resp.GetPodResources() {
		if pr == nil || pr.GetName() == "" {
			continue
		}
		for _, c := range pr.GetContainers() {
			if c == nil {
				continue
			}
			if len(pr.GetNamespace()) > maxNamespaceLen || len(pr.GetName()) > maxPodNameLen || len(c.GetName()) > maxContainerLen {
				m.oversize("container " + pr.GetNamespace() + "/" + pr.GetName() + "/" + c.GetName())
				continue
			}
			var ids []string
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					if !m.idFits(id) {
						continue
					}
					if base := gpuDevice(d.GetResourceName(), id); base != "" {
						ids = append(ids, base)
					} else if nvidiaResource(d.GetResourceName()) && id != "" {
						u := unmapped[d.GetResourceName()]
						if u == nil {
							u = &UnmappedDevices{Resource: d.GetResourceName()}
							unmapped[u.Resource] = u
						}
						if len(u.IDs) < maxUnmappedIDs && !slices.Contains(u.IDs, id) {
							u.IDs = append(u.IDs, id)
						}
					}
				}
			}
			for _, id := range draDeviceIDs(c.GetDynamicResources()) {
				if m.idFits(id) {
					ids = append(ids, id)
				}
			}
			for _, base := range ids {
				ref := PodRef{Namespace: pr.GetNamespace(), Name: pr.GetName(), Container: c.GetName()}
				if k := (deviceRef{base, keyOf(ref)}); !seen[k] {
					seen[k] = true
					m.byDevice[base] = append(m.byDevice[base], ref)
				}
				pods[pr.GetNamespace()+"/"+pr.GetName()] = true
			}
		}
	}
	for k := range m.byDevice {
		refs := m.byDevice[k]
		sort.Slice(refs, func(i, j int) bool { return refLess(refs[i], refs[j]) })
	}
	m.pods = len(pods)
	for _, u := range unmapped {
		m.unmapped = append(m.unmapped, *u)
	}
	slices.SortFunc(m.unmapped, func(a, b UnmappedDevices) int { return strings.Compare(a.Resource, b.Resource) })
	return m
}

// Unmapped are the resources of NVIDIA's whose devices the mapping could
// not tie to a GPU, by name; nil for none (m may be nil). Read only.
func (m *Mapping) Unmapped() []UnmappedDevices {
	if m == nil {
		return nil
	}
	return m.unmapped
}

// draDeviceIDs are the GPU and MIG UUIDs among the devices that dynamic
// resource allocation gave a container: a driver's device name, or the
// name of one of its CDI devices (vendor/class=NAME), when it is a UUID
// ("GPU-..." or "MIG-..."). Devices named otherwise (NVIDIA's DRA driver
// names them gpu-<index>, the UUID being an attribute of its
// ResourceSlice, which the pod-resources API does not carry) are left
// out: nothing in the answer ties them to a GPU.
func draDeviceIDs(drs []*podresourcesv1.DynamicResource) []string {
	var out []string
	seen := map[string]bool{} // (a set: a container may hold many)
	for _, dr := range drs {
		for _, cr := range dr.GetClaimResources() {
			names := []string{cr.GetDeviceName()}
			for _, cdi := range cr.GetCdiDevices() {
				names = append(names, cdiDeviceName(cdi.GetName()))
			}
			for _, n := range names {
				if isDeviceUUID(n) && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// cdiDeviceName is the device's name in a CDI device name
// (vendor/class=NAME).
func cdiDeviceName(n string) string {
	if i := strings.LastIndex(n, "="); i >= 0 {
		return n[i+1:]
	}
	return n
}

// isDeviceUUID says whether id is an NVML GPU or MIG device UUID.
func isDeviceUUID(id string) bool {
	return len(id) > len("GPU-") && (strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-"))
}

// refKey is what tells two containers apart: namespace, pod and container.
type refKey struct{ namespace, name, container string }

func keyOf(r PodRef) refKey { return refKey{r.Namespace, r.Name, r.Container} }

// deviceRef is a container's hold on a device.
type deviceRef struct {
	device string
	ref    refKey
}

// PodsOn returns the distinct containers holding any of the device IDs.
func (m *Mapping) PodsOn(ids ...string) []PodRef {
	return slices.Clone(m.podsOn(ids...))
}

// podsOn is PodsOn, the mapping's own slice where only one of the
// devices asked for is held (read only: ResolvePod, per process, copies
// nothing).
func (m *Mapping) podsOn(ids ...string) []PodRef {
	if m == nil {
		return nil
	}
	var held []PodRef
	n := 0
	for _, id := range ids {
		if refs := m.byDevice[id]; len(refs) > 0 {
			held = refs // distinct already
			n++
		}
	}
	if n <= 1 {
		return held
	}
	var out []PodRef
	seen := map[refKey]bool{}
	for _, id := range ids {
		for _, r := range m.byDevice[id] {
			if k := keyOf(r); !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return refLess(out[i], out[j]) })
	return out
}

// ResolvePod finds the pod of a process (or device) from its cgroup facts
// and the devices it runs on (m may be nil: no mapping yet):
//  1. the pod UID from the cgroup, with pod metadata when the provider knows it;
//  2. otherwise the single container that holds the device(s), if only one
//     does, or the single pod whose containers hold them (which of them is
//     not known: no container), leaving out the pods that pod metadata
//     knows by a UID other than the cgroup's (the process is in none of
//     them: a pod that holds no GPU of its own, the metadata not yet read);
//     stale, the metadata may know by its predecessor's UID a pod replaced
//     since by one of the same name, the process's: such pods are kept
//     where only they hold the device(s), and the process is then given its
//     predecessor's labels; where pods the metadata does not know hold them
//     too, the process may be in a replaced pod or in one new since the last
//     good read (the same inputs either way), and none is chosen;
//  3. otherwise a pod known only by its UID.
//
// Rule 2 is not applied to a process whose cgroup was read and names a
// place that is no pod's (NamesNoPod: a login session, a service, a user's
// slice; or cg.NoPod), but for the containers of the pod whose metadata
// lists the container ID the path names, outside a user's slice, below a
// node's root or where that pod alone holds the device (a node run in a
// service of a kind nodeRootAt does not know; see ofContainer):
// the NVIDIA device files are open to
// every user by default, and a host user's process on a pod's GPU is not
// the pod's. An unread path (cg.Path "") or one it does not recognise
// keeps the rule.
//
// Where it names no container, Holders lists those it may be in.
//
// Without pod metadata that knows the process's pod, rule 2 cannot tell
// the holder's own processes from those of a pod that reaches the GPU
// without being allocated it (all GPUs visible to a privileged container,
// or to one given NVIDIA_VISIBLE_DEVICES=all): byDevice is true where
// rule 2 placed the process of a cgroup naming a pod UID in the pod
// holding its devices (the pod's UID then taken to be cg.PodUID, which
// only the device says), so that HolderUIDs can keep one cgroup pod UID
// per holder pod (so too for Holders).
func (m *Mapping) ResolvePod(cg CgroupInfo, deviceIDs ...string) (ref *PodRef, byDevice bool) {
	cands := m.podsOn(deviceIDs...)
	if noPodPlace(cg) {
		if cands = m.ofContainer(cg, cands); len(cands) == 0 {
			return nil, false
		}
	}
	if cg.PodUID != "" && m != nil && len(m.metaByName) > 0 {
		others := slices.DeleteFunc(slices.Clone(cands), func(c PodRef) bool {
			md := m.metaByName[c.Namespace+"/"+c.Name]
			return md != nil && md.UID != cg.PodUID
		})
		switch {
		case !m.metaStale || len(others) == len(cands) || m.meta[cg.PodUID] != nil:
			cands = others
		case len(others) > 0:
			cands = nil // a replaced pod or a new one: either may be the process's
		default:
			// only pods known by another UID: a replaced one's, maybe
		}
	}
	if cg.PodUID != "" && m != nil {
		if md := m.meta[cg.PodUID]; md != nil {
			ref := &PodRef{Namespace: md.Namespace, Name: md.Name, UID: md.UID, Labels: md.Labels}
			if cg.ContainerID != "" {
				ref.Container = m.containerByID[cg.ContainerID]
			}
			if ref.Container == "" {
				// the container of this pod that holds the device
				var names []string
				for _, c := range cands {
					if c.Namespace == md.Namespace && c.Name == md.Name {
						names = append(names, c.Container)
					}
				}
				if len(names) == 1 {
					ref.Container = names[0]
				}
			}
			return ref, false
		}
	}
	if onePod(cands) {
		ref := cands[0]
		if len(cands) > 1 {
			ref.Container = ""
		}
		ref.UID = cg.PodUID
		ref = m.withMeta(ref)
		return &ref, cg.PodUID != ""
	}
	if cg.PodUID != "" {
		return &PodRef{UID: cg.PodUID}, false
	}
	return nil, false
}

// noPodPlace says whether cg names no pod, but a place that is no pod's
// (NamesNoPod, cg.NoPod).
func noPodPlace(cg CgroupInfo) bool {
	return cg.PodUID == "" && (cg.NoPod || NamesNoPod(cg.Path))
}

// ofContainer are those of cands, containers holding the devices of a
// process of cgroup facts cg, that are of the pod whose metadata lists
// cg's container ID (its container of that name alone where it is among
// them): none without metadata, a container ID, or such a pod among
// cands, and none in a user's slice, where any login user may name a
// cgroup of their own after a pod's container (its ID is in every
// process's /proc/PID/cgroup, for anyone to read). Any process with a
// subtree delegated to it (a Delegate=yes service's, a container's) may
// name one so too, below a node's root as elsewhere: the ID is taken
// only where cands are of one pod, as the device rule alone would give
// it, never to choose among the pods holding the device.
func (m *Mapping) ofContainer(cg CgroupInfo, cands []PodRef) []PodRef {
	cid := cg.ContainerID
	if m == nil || cid == "" || InUserSlice(cg.Path) || !onePod(cands) {
		return nil
	}
	var pod, same []PodRef
	for _, c := range cands {
		if md := m.metaByName[c.Namespace+"/"+c.Name]; md != nil && slices.Contains(md.ContainerIDs, cid) {
			pod = append(pod, c)
			if c.Container == m.containerByID[cid] {
				same = append(same, c)
			}
		}
	}
	if len(same) > 0 {
		return same
	}
	return pod
}

// onePod says whether refs are containers of one pod (at least one).
func onePod(refs []PodRef) bool {
	for _, r := range refs {
		if r.Namespace != refs[0].Namespace || r.Name != refs[0].Name {
			return false
		}
	}
	return len(refs) > 0
}

// Holders are the containers holding the device(s) that a process (or
// device) of cgroup facts cg, which ResolvePod placed at ref, may be in,
// where ref does not name its container: the containers of ref's pod,
// where ref names a pod; else every holder whose pod is not known (from
// pod metadata) by a UID other than cg's, or, the metadata stale, every
// holder: one it knows by another may have been replaced by the process's
// pod (as in ResolvePod), and where pods it does not know hold the device
// too, which of them the process is in is not known. Each is given as
// ResolvePod would give it, with its pod's labels and UID (cg's pod UID
// where the metadata does not know it, or knows another and is stale).
// None where ref names its container, none where cg names no pod but a
// place that is no pod's (as in ResolvePod: only the containers of the
// pod whose metadata lists its container ID), and none where
// more than max are left: a caller trying each would take too long, and
// no GPU is shared that many ways.
func (m *Mapping) Holders(cg CgroupInfo, ref *PodRef, max int, ids ...string) []PodRef {
	if m == nil || ref != nil && ref.Container != "" {
		return nil
	}
	cands := m.podsOn(ids...)
	if noPodPlace(cg) {
		cands = m.ofContainer(cg, cands)
	}
	var out []PodRef
	for _, c := range cands {
		if ref != nil && ref.Name != "" && (c.Namespace != ref.Namespace || c.Name != ref.Name) {
			continue
		}
		c = m.withMeta(c)
		switch {
		case c.UID == "":
			c.UID = cg.PodUID
		case cg.PodUID == "" || c.UID == cg.PodUID:
		case m.metaStale:
			c.UID = cg.PodUID // known by its predecessor's, maybe
		default:
			continue // another pod's
		}
		if len(out) == max {
			return nil
		}
		out = append(out, c)
	}
	return out
}

// Pods is the number of pods that hold a GPU or MIG device of the mapping.
func (m *Mapping) Pods() int {
	if m == nil {
		return 0
	}
	return m.pods
}

// Allocation is one container's hold on one device, as the pod-resources
// answer gives it: the device ID with any "::<replica>" suffix removed (a
// GPU or MIG UUID, the older "MIG-<GPU UUID>/<GI>/<CI>" form, a GPU's
// index (GPUIndexID), or a UUID that dynamic resource allocation named),
// and the pod with its container
// (its UID and labels from the pod metadata, when known).
type Allocation struct {
	Device string
	Pod    PodRef
}

// Allocations are the mapping's containers and the devices they hold, by
// device, namespace, pod and container; one per container and device,
// however many replicas of the device it holds. They are listed once per
// mapping (pod info asks at every sample, the mapping changes only at a
// refresh): the slice is the mapping's own, read only.
func (m *Mapping) Allocations() []Allocation {
	if m == nil {
		return nil
	}
	m.allocsOnce.Do(func() { m.allocs = m.allocations() })
	return m.allocs
}

// allocations lists Allocations.
func (m *Mapping) allocations() []Allocation {
	var out []Allocation
	for dev, refs := range m.byDevice {
		for _, r := range refs {
			out = append(out, Allocation{Device: dev, Pod: m.withMeta(r)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return refLess(a.Pod, b.Pod)
	})
	return out
}

// withMeta is ref with its pod's labels and, where ref has no UID, its
// UID, from the pod metadata when known (m may be nil: none).
func (m *Mapping) withMeta(ref PodRef) PodRef {
	if m == nil {
		return ref
	}
	if md := m.metaByName[ref.Namespace+"/"+ref.Name]; md != nil {
		ref.Labels = md.Labels
		if ref.UID == "" {
			ref.UID = md.UID
		}
	}
	return ref
}

// refLess orders pods by namespace, name and container.
func refLess(a, b PodRef) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.Container < b.Container
}
