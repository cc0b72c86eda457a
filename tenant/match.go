package tenant

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// subject is a process, MIG instance or vGPU instance being attributed.
type subject struct {
	// label names a MIG or vGPU instance for logs; processes are named by pid
	label string
	pid   uint32

	hasProc bool
	exe     string
	uid     int // -1 unknown
	cgroup  string
	// unit is the system manager's service the process runs in, "" for
	// none or unknown: read whatever the selectors, for the workload
	unit string
	// noPod is true where the process's cgroup file says it is in no
	// pod's place (kube.ProcCgroup.NoPod), or was refused or could not be
	// read though the process runs: it is given no pod by its devices
	noPod bool

	gpu     int
	migUUID string
	gi      int // -1 when not in a MIG instance
	vgpu    *gpu.VGPUInstance
	pod     *kube.PodRef
	// podUID is the UID of the pod the process runs in: its cgroup's, else
	// the pod's as resolved (gpu.Pod.UID)
	podUID string
	// podOfCgroup is true when pod, if any, was read from the cgroup path
	// alone (no pod mapping): it is then a function of cgroup
	podOfCgroup bool
	// holders are the containers holding its device that it may be in,
	// where pod does not name its container (kube.Mapping.Holders)
	holders []kube.PodRef
	// byDevice: pod was given by its devices alone under its cgroup's pod
	// UID (kube.Mapping.ResolvePod), which placeAll checks (kube.HolderUIDs)
	// against the sample's other processes in that pod
	byDevice bool
}

// maxHolders bounds the containers of one device that a subject is
// matched in, each in turn (kube.Mapping.Holders).
const maxHolders = 256

// placeInPod places sub, of cgroup facts cg on the devices ids, in its
// pod as podMap (nil: none) tells it: the pod, and where that does not
// name its container, the containers it may be in.
func placeInPod(sub *subject, podMap *kube.Mapping, cg kube.CgroupInfo, ids []string) {
	sub.pod, sub.byDevice = podMap.ResolvePod(cg, ids...)
	sub.podUID = cg.PodUID
	if sub.podUID == "" && sub.pod != nil {
		sub.podUID = sub.pod.UID
	}
	sub.podOfCgroup = podMap == nil
	sub.holders = podMap.Holders(cg, sub.pod, maxHolders, ids...)
}

// workload is what runs the subject's process, if anything is known: the
// pod the attribution resolved, the systemd service it runs in.
func (sub *subject) workload() (Workload, bool) {
	w := Workload{PID: sub.pid, Unit: sub.unit}
	if sub.pod != nil && sub.pod.Name != "" && sub.pod.Namespace != "" {
		w.Pod = &gpu.Pod{Namespace: sub.pod.Namespace, Name: sub.pod.Name, UID: sub.podUID}
	}
	return w, w.Pod != nil || w.Unit != ""
}

// desc names the subject in logs.
func (sub *subject) desc() string {
	if sub.label != "" {
		return sub.label
	}
	return fmt.Sprintf("pid %d on GPU %d", sub.pid, sub.gpu)
}

func (s *Selector) matches(sub *subject) bool {
	if s.Executable != "" && (sub.exe == "" || !globMatch(s.exeRE, sub.exe)) {
		return false
	}
	if s.UID != nil && (sub.uid < 0 || sub.uid != *s.UID) {
		return false
	}
	if s.Cgroup != "" && (sub.cgroup == "" || !globMatch(s.cgroupRE, sub.cgroup)) {
		return false
	}
	if s.MIGUUID != "" && sub.migUUID != s.MIGUUID {
		return false
	}
	if g := s.GPUInstance; g != nil && (sub.gi < 0 || sub.gi != g.ID || sub.gpu != g.GPU) {
		return false
	}
	if v := s.VGPU; v != nil {
		if sub.vgpu == nil {
			return false
		}
		if v.UUID != "" && v.UUID != sub.vgpu.UUID {
			return false
		}
		if v.VMName != "" && !globMatch(v.vmRE, sub.vgpu.VMName) {
			return false
		}
	}
	if k := s.Kubernetes; k != nil {
		p := sub.pod
		if p == nil {
			return false
		}
		if k.Namespace != "" && k.Namespace != p.Namespace {
			return false
		}
		if k.PodUID != "" && !strings.EqualFold(k.PodUID, p.UID) {
			return false
		}
		if k.Pod != "" && (p.Name == "" || !globMatch(k.podRE, p.Name)) {
			return false
		}
		if k.Container != "" && (p.Container == "" || !globMatch(k.containerRE, p.Container)) {
			return false
		}
		for lk, lv := range k.Labels {
			if v, ok := p.Labels[lk]; !ok || v != lv {
				return false
			}
		}
	}
	return true
}

// attrState is Build's memory across samples: conflicts already reported
// and the per-tenant context-switch counters.
type attrState struct {
	seen           map[string]bool
	conflicts      int
	conflictsTotal uint64
	cgroupErrs     uint64
	// cgroupLogged: whether a read that failed otherwise, one of a process
	// that is gone, and one the exporter may not make were logged; each is
	// logged once, so that a process that exited since the GPU listed it
	// hides neither a /proc that cannot be read nor one the exporter may
	// not read
	cgroupLogged [3]bool
	// previous device context-switch counter, by device UUID
	prevCS map[string]uint64
	// accumulated context switches, by device and tenant
	csAcc map[csKey]float64
	// cumulative device events
	events []EventCount
	// share over-commitments already logged (GPU, instance and tenants)
	shareLogged map[string]bool
	// footprint history, by device UUID
	fits map[string]*gpuFit
	// who ran on each device at the previous sample and this one
	interval intervalState
	// attributions already made of subjects without a vGPU or a mapped
	// pod (whose selector inputs are all in the key), so that a steady host is not
	// matched against every selector on every build; conflicts are not
	// kept, so that each one is counted
	memo map[memoKey]string
	// cgroups caches kube.ParseCgroupPath by path (a steady host's
	// processes keep theirs); it starts over when memoLimit is reached
	cgroups map[string]kube.CgroupInfo
	// place is the sample's processes placed in their pods, and the
	// holders' UIDs from sample to sample
	place placement
}

// memoKey is everything a selector reads of a subject without a vGPU and
// without a pod from a pod mapping, with the configuration it was matched
// against.
type memoKey struct {
	compiled *compiledConfig
	label    string
	pid      uint32
	hasProc  bool
	exe      string
	uid      int
	cgroup   string
	gpu      int
	migUUID  string
	gi       int
}

// memoLimit bounds the attribution memo; it starts over when full.
const memoLimit = 10000

func newAttrState() attrState {
	return attrState{seen: map[string]bool{}, shareLogged: map[string]bool{}, prevCS: map[string]uint64{}, csAcc: map[csKey]float64{}, memo: map[memoKey]string{}, fits: map[string]*gpuFit{}, cgroups: map[string]kube.CgroupInfo{}}
}

// cgroupUnread says whether a failed read of a process's cgroup file
// left its place unknown: the process is gone (its /proc entry missing:
// it exited, or the host's /proc is not the one read), the exporter may
// not open the file (EPERM or EACCES: /proc mounted hidepid=1 and no
// CAP_SYS_PTRACE, or a Linux security module; no process can make the
// open fail so), or there is no reader. Any other failure (a file refused
// for a forged line, a path too long to read) is the process's own doing,
// and gives it no pod.
func cgroupUnread(err error) bool {
	return kube.ProcessGone(err) || errors.Is(err, fs.ErrPermission) || errors.Is(err, errNoProcFacts)
}

// logCgroupErr logs the first failed cgroup read of a process whose place
// is left unknown (cgroupUnread), and the first that failed otherwise.
func (a *attrState) logCgroupErr(logger log.Logger, pid uint32, err error) {
	k, msg := 0, "cannot read a GPU process's cgroup; cgroup selectors will not match it, nor kubernetes selectors: it is given no pod"
	switch {
	case errors.Is(err, fs.ErrPermission):
		// the exporter's own setting, on every sample: a line of its own,
		// not hidden behind a process that exited
		k, msg = 2, "the exporter may not read a GPU process's cgroup (/proc mounted hidepid=1 or hidepid=noaccess without CAP_SYS_PTRACE, or a Linux security module); cgroup selectors will not match it, kubernetes selectors only by the pod that alone holds its GPU"
	case cgroupUnread(err):
		k, msg = 1, "a GPU process's cgroup is not known (its /proc entry is gone: it exited since the GPU listed it, or the host's /proc is not visible); cgroup selectors will not match it, kubernetes selectors only by the pod that alone holds its GPU"
	}
	if a.cgroupLogged[k] {
		return
	}
	a.cgroupLogged[k] = true
	level.Warn(logger).Log("msg", msg, "pid", pid, "err", err)
}

// parseCgroup is kube.ParseCgroupPath, cached.
func (a *attrState) parseCgroup(path string) kube.CgroupInfo {
	if cg, ok := a.cgroups[path]; ok {
		return cg
	}
	if len(a.cgroups) >= memoLimit {
		clear(a.cgroups)
	}
	cg := kube.ParseCgroupPath(path)
	a.cgroups[path] = cg
	return cg
}

// csKey is a GPU's tenant, as the meters' key is.
type csKey = meterKey

// reconfigured starts conflict logging over and drops the context-switch
// counters of tenants that compiled no longer has, so that reloads that rename
// tenants do not accumulate them, and their holds of the devices, so that
// none is carried forward while a process list is refused (with a pod
// tenancy, a tenant the file no longer has may still be a namespace's: its
// counters and holds are kept).
func (a *attrState) reconfigured(compiled *compiledConfig) {
	a.seen = map[string]bool{}
	a.shareLogged = map[string]bool{}
	a.memo = map[memoKey]string{}
	if compiled.pods.On() {
		return
	}
	removed := func(tenant string) bool {
		_, ok := compiled.class[tenant]
		return !ok && tenant != Unassigned
	}
	for k := range a.csAcc {
		if removed(k.tenant) {
			delete(a.csAcc, k)
		}
	}
	a.interval.forget(removed)
}

func (a *attrState) status() AttributionStatus {
	return AttributionStatus{Conflicts: a.conflicts, ConflictsTotal: a.conflictsTotal, CgroupErrorsTotal: a.cgroupErrs}
}

// attribute returns the tenant sub belongs to: the single tenant with a
// matching selector; with none, the pod tenancy's tenant of its pod (see
// PodTenancy), else Unassigned; with a conflict between two or more
// tenants (logged once and counted), Unassigned. Where its container is
// not known, the tenant that all the containers it may be in give it
// (holdersTenant); where they give different ones, the one tenant whose
// selector matches what is known of it, else Unassigned.
func (b *Builder) attribute(compiled *compiledConfig, sub *subject) string {
	if len(sub.holders) > 0 {
		if t, ok := compiled.holdersTenant(sub); ok {
			return t
		}
		// they differ: by what is known, and no pod tenancy, which
		// would give the pod's tenant to a container the file gives
		// another
		t, _ := b.match(compiled, sub)
		return t
	}
	memo := (sub.pod == nil || sub.podOfCgroup) && sub.vgpu == nil
	var key memoKey
	if memo {
		key = memoKey{compiled, sub.label, sub.pid, sub.hasProc, sub.exe, sub.uid, sub.cgroup, sub.gpu, sub.migUUID, sub.gi}
		if t, ok := b.attr.memo[key]; ok {
			return t
		}
	}
	t, conflict := b.match(compiled, sub)
	if t == Unassigned && !conflict {
		t = compiled.pods.tenantOf(sub.pod)
	}
	if memo && !conflict {
		if len(b.attr.memo) >= memoLimit {
			b.attr.memo = map[memoKey]string{}
		}
		b.attr.memo[key] = t
	}
	return t
}

// match attributes sub by its selectors; conflict is true when more than
// one tenant matched.
func (b *Builder) match(compiled *compiledConfig, sub *subject) (tenant string, conflict bool) {
	hits := compiled.matching(sub)
	switch len(hits) {
	case 0:
		return Unassigned, false
	case 1:
		return hits[0], false
	}
	b.attr.conflicts++
	desc := sub.desc()
	key := desc + "|" + strings.Join(hits, ",")
	if !b.attr.seen[key] {
		if len(b.attr.seen) > 10000 {
			b.attr.seen = map[string]bool{}
		}
		b.attr.seen[key] = true
		b.attr.conflictsTotal++
		level.Error(b.logger).Log("msg", "matches more than one tenant; attributed to "+Unassigned, "subject", desc, "tenants", strings.Join(hits, ","))
	}
	return Unassigned, true
}

// holdersTenant is the tenant that each of sub's holders would give it,
// were it in that container (its one matching tenant, else the pod
// tenancy's), when they all give the same one; false when it has no
// holders, or they give different tenants or a conflict. The process of
// a GPU that several containers share by replicas, and that neither its
// cgroup nor the pod metadata places in one, is then that tenant's all
// the same: two containers of one pod, pods of one namespace.
func (c *compiledConfig) holdersTenant(sub *subject) (string, bool) {
	if len(sub.holders) == 0 {
		return "", false
	}
	var t string
	in := *sub
	for i := range sub.holders {
		in.pod = &sub.holders[i]
		var ti string
		switch hits := c.matching(&in); len(hits) {
		case 0:
			ti = c.pods.tenantOf(in.pod)
		case 1:
			ti = hits[0]
		default:
			return "", false
		}
		if i > 0 && ti != t {
			return "", false
		}
		t = ti
	}
	return t, true
}

// matching are the tenants with a selector that matches sub, in the
// file's order.
func (c *compiledConfig) matching(sub *subject) []string {
	var hits []string
	for i := range c.Tenants {
		t := &c.Tenants[i]
		for j := range t.Selectors {
			if t.Selectors[j].matches(sub) {
				hits = append(hits, t.Name)
				break
			}
		}
	}
	return hits
}

// processSubject gathers what the selectors need about a process.
func (b *Builder) processSubject(compiled *compiledConfig, podMap *kube.Mapping, d *gpu.Device, p *gpu.Process, inst *gpu.MIGInstance) *subject {
	sub := &subject{
		pid:     p.PID,
		hasProc: true,
		exe:     p.Name,
		uid:     p.UID,
		cgroup:  p.Cgroup,
		gpu:     d.Index,
		gi:      -1,
	}
	if p.Name != "" {
		sub.exe = filepath.Base(p.Name)
	} else if compiled.needExe {
		sub.exe = b.proc.Comm(p.PID)
	}
	if sub.uid < 0 && compiled.needUID {
		sub.uid = b.proc.UID(p.PID)
	}
	// the cgroup is read whatever the selectors: the service it names is
	// the workload's, which the rebalance planner must see to keep from
	// restarting a service that runs another tenant's process too
	if sub.cgroup != "" {
		sub.unit = kube.SystemdService(sub.cgroup) // the readings' path
	} else if cg, err := b.proc.Cgroup(p.PID); err != nil {
		sub.noPod = !cgroupUnread(err)
		if compiled.needCgroup {
			b.attr.cgroupErrs++
			b.attr.logCgroupErr(b.logger, p.PID, err)
		}
	} else {
		sub.cgroup, sub.unit, sub.noPod = cg.Path, cg.Unit, cg.NoPod
	}
	ids := gpuDeviceIDs(d)
	if inst != nil {
		sub.migUUID, sub.gi = inst.UUID, inst.GPUInstanceID
		cis := inst.ComputeInstances()
		if i := slices.IndexFunc(cis, func(ci gpu.MIGComputeInstance) bool { return ci.ID >= 0 && ci.ID == p.ComputeInstanceID }); i >= 0 {
			cis = cis[i : i+1] // the MIG device of its compute instance
			sub.migUUID = cis[0].UUID
		}
		ids = migDeviceIDs(d, inst.GPUInstanceID, cis...) // the pod holds the MIG device, not the GPU
	}
	if p.VGPUInstance != 0 {
		for i := range d.VGPUs {
			if d.VGPUs[i].ID == p.VGPUInstance {
				sub.vgpu = &d.VGPUs[i]
			}
		}
	}
	if compiled.needCgroup && (podMap != nil || sub.cgroup != "") {
		cg := b.attr.parseCgroup(sub.cgroup)
		cg.NoPod = sub.noPod
		placeInPod(sub, podMap, cg, ids)
	}
	return sub
}

// gpuDeviceIDs are the device IDs a device plugin may give a whole GPU:
// its UUID, or its index (NVIDIA's under deviceIDStrategy=index).
func gpuDeviceIDs(d *gpu.Device) []string {
	return []string{d.UUID, kube.GPUIndexID(d.Index)}
}

// migDeviceIDs are the device IDs a device plugin may give the MIG devices
// of compute instances cis of GPU instance gi: each one's UUID, or the
// older "MIG-<GPU UUID>/<GI>/<CI>" form.
func migDeviceIDs(d *gpu.Device, gi int, cis ...gpu.MIGComputeInstance) []string {
	ids := make([]string, 0, 2*len(cis))
	for _, ci := range cis {
		ids = append(ids, ci.UUID, fmt.Sprintf("MIG-%s/%d/%d", d.UUID, gi, ci.ID))
	}
	return ids
}
