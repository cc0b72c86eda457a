package pause

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// host is a fake procfs and cgroupfs, with signals recorded.
type host struct {
	t            *testing.T
	proc, v2, v1 string
	mu           sync.Mutex
	signals      []string
	pgids        map[int]int
	selfPgid     int
	exited       map[int]bool // process groups with no process left
	// pgidHook, where set, answers getpgid first (ok: its answer)
	pgidHook func(pid int) (pgid int, ok bool)
}

func newHost(t *testing.T) *host {
	d := t.TempDir()
	h := &host{t: t, proc: filepath.Join(d, "proc"), v2: filepath.Join(d, "v2"), v1: filepath.Join(d, "freezer"), pgids: map[int]int{}, selfPgid: 4242, exited: map[int]bool{}}
	for _, p := range []string{h.proc, h.v2, h.v1} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// process adds PID pid in cgroup v2 path v2 and v1 freezer path v1
// ("" for none), in process group pgid.
func (h *host) process(pid int, v2, v1 string, pgid int) {
	var b strings.Builder
	if v1 != "" {
		fmt.Fprintf(&b, "6:freezer:%s\n", v1)
	}
	fmt.Fprintf(&b, "0::%s\n", v2)
	dir := filepath.Join(h.proc, fmt.Sprint(pid))
	must(h.t, os.MkdirAll(dir, 0o755))
	must(h.t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(b.String()), 0o644))
	must(h.t, os.WriteFile(filepath.Join(dir, "stat"), fmt.Appendf(nil, "%d (sh) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, pgid, pgid, 1000+pid), 0o644))
	h.pgids[pid] = pgid
}

// self writes the procfs root's self/cgroup, the pauser's own: the
// hierarchies the kernel lists for every process.
func (h *host) self(file string) {
	must(h.t, os.MkdirAll(filepath.Join(h.proc, "self"), 0o755))
	must(h.t, os.WriteFile(filepath.Join(h.proc, "self", "cgroup"), []byte(file), 0o644))
}

// cgroupV2Dir makes a v2 cgroup that reports frozen at once.
func (h *host) cgroupV2Dir(path string) string {
	dir := filepath.Join(h.v2, path)
	must(h.t, os.MkdirAll(dir, 0o755))
	must(h.t, os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644))
	must(h.t, os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("populated 1\nfrozen 1\n"), 0o644))
	return dir
}

func (h *host) cgroupV1Dir(path string) string {
	dir := filepath.Join(h.v1, path)
	must(h.t, os.MkdirAll(dir, 0o755))
	must(h.t, os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644))
	return dir
}

func (h *host) kill(pid int, sig syscall.Signal) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.exited[-pid] {
		return syscall.ESRCH
	}
	h.signals = append(h.signals, fmt.Sprintf("%d %s", pid, sig))
	return nil
}

func (h *host) getpgid(pid int) (int, error) {
	if h.pgidHook != nil {
		if g, ok := h.pgidHook(pid); ok {
			return g, nil
		}
	}
	if pid == os.Getpid() {
		return h.selfPgid, nil
	}
	if g, ok := h.pgids[pid]; ok {
		return g, nil
	}
	return 0, syscall.ESRCH
}

func (h *host) pauser(t *testing.T, clock gpu.Clock, o Options) *Pauser {
	o.Clock, o.ProcRoot, o.CgroupV2Root, o.CgroupV1Freezer = clock, h.proc, h.v2, h.v1
	o.kill, o.getpgid = h.kill, h.getpgid
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return strings.TrimSpace(string(b))
}

const (
	podPath  = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f2c1a2b_3c4d_5e6f_7a8b_9c0d1e2f3a4b.slice/cri-containerd-" + hex64 + ".scope"
	hex64    = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	unitPath = "/system.slice/trainer.service"
	// libvirt's QEMU under systemd-machined (cgroup v2 and the v1 freezer)
	vmScope   = `/machine.slice/machine-qemu\x2d1\x2dvm\x2dtrain.scope`
	vmScopeV1 = `/machine.slice/machine-qemu\x2d2\x2dvm\x2db.scope`
	// a node run as a systemd-nspawn machine, and the machine the pauser
	// runs in
	nodeScope = "/machine.slice/machine-node1.scope"
	hostScope = "/machine.slice/machine-host.scope"
	// Proxmox VE's QEMU of VM 100, and of VM 101 on a v1 freezer
	pveScope   = "/qemu.slice/100.scope"
	pveScopeV1 = "/qemu.slice/101.scope"
)

// Each process is paused by the group of its own: a pod's or a unit's
// cgroup (v2, else the v1 freezer), else its process group; never a
// session or the root, nor the pauser's own process group.
func TestResolve(t *testing.T) {
	h := newHost(t)
	h.cgroupV2Dir(podPath)
	h.cgroupV2Dir(unitPath)
	h.cgroupV1Dir("/docker/" + hex64)
	h.process(10, podPath, "", 10)
	h.process(11, unitPath+"/worker", "", 11)
	h.process(12, "/", "/docker/"+hex64, 12)
	h.process(13, "/user.slice/user-0.slice/session-1.scope", "/", 130)
	h.process(14, "/", "/", h.selfPgid)
	h.process(15, "/", "/", 1)
	// As a container with a private cgroup namespace reads them: another
	// pod's path relative to its own; two units of the same name, and the
	// root, are not frozen by cgroup.
	h.process(16, "/../../"+podPath[len("/kubepods.slice/"):], "", 16)
	h.cgroupV2Dir("/a.slice/twin.service")
	h.cgroupV2Dir("/b.slice/twin.service")
	h.process(17, "/../../twin.service", "", 17)
	h.process(18, "/../../../", "", 18)
	// a libvirt VM's QEMU: its scope frozen, v2 and v1
	h.cgroupV2Dir(vmScope)
	h.cgroupV2Dir(vmScope + "/libvirt/emulator")
	h.process(19, vmScope+"/libvirt/emulator", "", 19)
	h.cgroupV1Dir(vmScopeV1)
	h.process(20, "/", vmScopeV1, 20)
	// a session scope named like one, outside machine.slice: not
	h.process(21, "/user.slice/machine-x.scope", "", 21)
	// a pod on a node that is itself a machine: the pod's, not the node's
	h.cgroupV2Dir(nodeScope + podPath)
	h.process(22, nodeScope+podPath, "", 22)
	// machines within a machine: the innermost
	inner := nodeScope + `/payload/machine.slice/machine-qemu\x2d3\x2dinner.scope`
	h.cgroupV2Dir(inner)
	h.process(23, inner+"/libvirt/emulator", "", 23)
	// a machine that holds the pauser itself: never frozen
	h.cgroupV2Dir(hostScope)
	h.process(os.Getpid(), hostScope+"/payload/system.slice/vgpu-exporter.service", "", h.selfPgid)
	h.process(24, hostScope+"/payload/other", "", 24)
	// a cgroup file over the procfs bound, and one that is a FIFO: refused
	// (a read of either would balloon or block)
	h.process(25, "/", "", 25)
	must(t, os.WriteFile(filepath.Join(h.proc, "25", "cgroup"), []byte("0::/"+strings.Repeat("a", 2<<20)+"\n"), 0o644))
	h.process(26, "/", "", 26)
	must(t, os.Remove(filepath.Join(h.proc, "26", "cgroup")))
	must(t, syscall.Mkfifo(filepath.Join(h.proc, "26", "cgroup"), 0o644))
	// Proxmox VE's VMs: their scopes frozen, v2 and v1; one a user made
	// under their own manager: not
	h.cgroupV2Dir(pveScope)
	h.process(27, pveScope, "", 27)
	h.cgroupV1Dir(pveScopeV1)
	h.process(28, "/", pveScopeV1, 28)
	userPVE := "/user.slice/user-1000.slice/user@1000.service/qemu.slice/100.scope"
	h.cgroupV2Dir(userPVE)
	h.process(29, userPVE, "", 29)
	// a hybrid host, the kubelet's cgroupfs driver (k3s's agent, its
	// containerd in its own service): the container's process left in the
	// agent's unified cgroup (which holds the kubelet, containerd and
	// every container), the v1 freezer's naming its pod: the pod's, never
	// the agent's service
	fsPod := "/kubepods/burstable/pod0f2c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b/" + hex64
	h.cgroupV2Dir("/system.slice/k3s-agent.service")
	h.cgroupV1Dir(fsPod)
	h.process(30, "/system.slice/k3s-agent.service", fsPod, 30)
	h.process(31, "/system.slice/k3s-agent.service", "/", 31) // a process of the agent's own
	// the unified line naming the container alone (docker's "/docker/<id>"),
	// the v1 freezer's its pod: the pod's, as kube ranks them
	h.cgroupV2Dir("/docker/" + hex64)
	h.process(32, "/docker/"+hex64, fsPod, 32)
	// the unified line naming a pod, the v1 freezer's a container alone:
	// the unified one's
	h.cgroupV2Dir(fsPod)
	h.process(33, fsPod, "/docker/"+hex64, 33)
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
	for _, c := range []struct {
		pid     uint32
		want    string
		wantErr bool
	}{
		{30, filepath.Join(h.v1, fsPod), false},
		{31, filepath.Join(h.v2, "/system.slice/k3s-agent.service"), false},
		{32, filepath.Join(h.v1, fsPod), false},
		{33, filepath.Join(h.v2, fsPod), false},
		{10, filepath.Join(h.v2, podPath), false},
		{11, filepath.Join(h.v2, unitPath), false},
		{12, filepath.Join(h.v1, "docker", hex64), false},
		{13, "pgid:130", false},
		{14, "", true},
		{15, "", true},
		{16, filepath.Join(h.v2, podPath), false},
		{17, "pgid:17", false},
		{18, "pgid:18", false},
		{19, filepath.Join(h.v2, vmScope), false},
		{20, filepath.Join(h.v1, vmScopeV1), false},
		{21, "pgid:21", false},
		{22, filepath.Join(h.v2, nodeScope+podPath), false},
		{23, filepath.Join(h.v2, inner), false},
		{24, "pgid:24", false},
		{25, "", true},
		{26, "", true},
		{27, filepath.Join(h.v2, pveScope), false},
		{28, filepath.Join(h.v1, pveScopeV1), false},
		{29, "pgid:29", false},
		{99, "", true},
	} {
		g, err := p.r.resolve(c.pid)
		if (err != nil) != c.wantErr {
			t.Errorf("PID %d: err %v, want error %v", c.pid, err, c.wantErr)
			continue
		}
		if err == nil && g.Key() != c.want {
			t.Errorf("PID %d: group %s, want %s", c.pid, g.Key(), c.want)
		}
	}
}

// waitBlocked waits until the pulse loop waits on the clock.
func waitBlocked(t *testing.T, c *gpu.ManualClock, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Waiters() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d clock waiters, want %d", c.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The pulse freezes for duty*period (capped by MaxPause), thaws for the
// rest, and a duty of 0 thaws at once and ends the loop.
func TestPulse(t *testing.T) {
	for _, c := range []struct {
		name     string
		duty     float64
		maxPause time.Duration
		on       time.Duration
	}{
		{"duty", 0.4, 0, 200 * time.Millisecond},
		{"capped by max pause", 0.9, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			dir := h.cgroupV2Dir(podPath)
			h.process(10, podPath, "", 10)
			clock := gpu.NewManualClock(time.Unix(0, 0))
			p := h.pauser(t, clock, Options{Period: 500 * time.Millisecond, MaxPause: c.maxPause})
			freeze := filepath.Join(dir, "cgroup.freeze")
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, c.duty))
			if got := read(t, freeze); got != "1" {
				t.Fatalf("after SetPauseDuty: cgroup.freeze %s, want 1", got)
			}
			waitBlocked(t, clock, 1)
			clock.Advance(c.on - time.Millisecond)
			if got := read(t, freeze); got != "1" {
				t.Fatalf("before the on time: cgroup.freeze %s, want 1", got)
			}
			clock.Advance(time.Millisecond)
			waitBlocked(t, clock, 1)
			if got := read(t, freeze); got != "0" {
				t.Fatalf("after the on time: cgroup.freeze %s, want 0", got)
			}
			clock.Advance(500*time.Millisecond - c.on)
			waitBlocked(t, clock, 1)
			if got := read(t, freeze); got != "1" {
				t.Fatalf("next period: cgroup.freeze %s, want 1", got)
			}
			must(t, p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10}, 0))
			if got := read(t, freeze); got != "0" {
				t.Fatalf("after duty 0: cgroup.freeze %s, want 0", got)
			}
			if len(paused(p)) != 0 {
				t.Errorf("paused %v after duty 0", paused(p))
			}
		})
	}
}

// A tenant is paused as a whole: a process without a group of its own, or
// a group that does not freeze, leaves all of them running.
func TestPauseAsAWhole(t *testing.T) {
	h := newHost(t)
	dirA := h.cgroupV2Dir(podPath)
	h.process(10, podPath, "", 10)
	h.process(11, "/", "/", h.selfPgid) // no group of its own
	p := h.pauser(t, gpu.NewManualClock(time.Unix(0, 0)), Options{})
	if err := p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10, 11}, 0.5); err == nil {
		t.Fatal("paused a tenant with a process that has no group of its own")
	}
	if got := read(t, filepath.Join(dirA, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze %s, want 0", got)
	}

	// the second group's freeze fails: the first one is thawed
	unit := h.cgroupV1Dir("/system.slice/ranks.service")
	h.process(12, "/", "/system.slice/ranks.service", 12)
	must(t, os.Remove(filepath.Join(unit, "freezer.state")))
	must(t, os.Mkdir(filepath.Join(unit, "freezer.state"), 0o755)) // unwritable
	if err := p.SetPauseDuty(context.Background(), "GPU-a", "trainer", []uint32{10, 12}, 0.5); err == nil {
		t.Fatal("paused a tenant whose second group does not freeze")
	}
	if got := read(t, filepath.Join(dirA, "cgroup.freeze")); got != "0" {
		t.Errorf("first group left frozen: cgroup.freeze %s", got)
	}
}

// Bounds, v1 and signals; a duty of 0 thaws what no pulse of this process
// paused (a restart after a crash), and a tenant on two GPUs follows the
// larger duty.
func TestThawAndSignals(t *testing.T) {
	h := newHost(t)
	v1 := h.cgroupV1Dir("/docker/" + hex64)
	must(t, os.WriteFile(filepath.Join(v1, "freezer.state"), []byte("FROZEN"), 0o644))
	h.process(12, "/", "/docker/"+hex64, 12)
	h.process(13, "/user.slice/user-0.slice/session-1.scope", "/", 130)
	clock := gpu.NewManualClock(time.Unix(0, 0))
	p := h.pauser(t, clock, Options{})
	ctx := context.Background()
	if err := p.SetPauseDuty(ctx, "GPU-a", "t", []uint32{12}, 0.95); err == nil {
		t.Error("duty 0.95 accepted above the 0.9 ceiling")
	}
	must(t, p.SetPauseDuty(ctx, "GPU-a", "t", []uint32{12}, 0))
	if got := read(t, filepath.Join(v1, "freezer.state")); got != "THAWED" {
		t.Errorf("v1 freezer.state %s after duty 0, want THAWED", got)
	}

	must(t, p.SetPauseDuty(ctx, "GPU-a", "s", []uint32{13}, 0.5))
	must(t, p.SetPauseDuty(ctx, "GPU-b", "s", []uint32{13}, 0.2))
	if got := paused(p)["s"]; got != 0.5 {
		t.Errorf("duty of a tenant on two GPUs %v, want the larger 0.5", got)
	}
	must(t, p.SetPauseDuty(ctx, "GPU-a", "s", []uint32{13}, 0))
	if got := paused(p)["s"]; got != 0.2 {
		t.Errorf("duty %v after GPU-a's 0, want GPU-b's 0.2", got)
	}
	must(t, p.Close())
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := strings.Join(h.signals, ","); got != "-130 stopped (signal),-130 continued" {
		t.Errorf("signals %q", got)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a clock")
	}
	if _, err := New(Options{Clock: gpu.RealClock{}, MaxDuty: 1.5}); err == nil {
		t.Error("New with a max duty above 1")
	}
	if _, err := Detect(Options{Clock: gpu.RealClock{}}, t.TempDir()); !errors.Is(err, gpu.ErrNotSupported) {
		t.Errorf("Detect without a freezer: %v", err)
	}
}

// paused is the duty of every tenant with a pulse running.
func paused(p *Pauser) map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]float64{}
	for name, pl := range p.tenants {
		pl.mu.Lock()
		out[name] = pl.dutyLocked()
		pl.mu.Unlock()
	}
	return out
}
