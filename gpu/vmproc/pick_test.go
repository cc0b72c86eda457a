package vmproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// fakeProc is a process of a fake procfs: its command line, its
// /proc/PID/cgroup ("" for none) and the targets of its open files (nil:
// /proc/PID/fd cannot be read, as another user's without CAP_SYS_PTRACE).
type fakeProc struct {
	cmd    []byte
	cgroup string
	fds    []string
}

func writeProcs(t *testing.T, root string, procs map[int]fakeProc) {
	t.Helper()
	for pid, p := range procs {
		write(t, root, pid, p.cmd)
		dir := filepath.Join(root, strconv.Itoa(pid))
		if p.cgroup != "" {
			if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(p.cgroup+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if p.fds == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i, target := range p.fds {
			if err := os.Symlink(target, filepath.Join(dir, "fd", strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fakeSys is a fake sysfs with mdev device mdev in IOMMU group group (""
// for none) and, where cdev is set, its VFIO character device (iommufd).
func fakeSys(t *testing.T, mdev, group, cdev string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "bus", "mdev", "devices", mdev)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if group != "" {
		if err := os.Symlink("../../../kernel/iommu_groups/"+group, filepath.Join(dir, "iommu_group")); err != nil {
			t.Fatal(err)
		}
	}
	if cdev != "" {
		if err := os.MkdirAll(filepath.Join(dir, "vfio-dev", cdev), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	mdevA   = "b1a2c3d4-0000-4000-8000-00000000000a"
	libvirt = `0::/machine.slice/machine-qemu\x2d1\x2dtrain.scope/libvirt/emulator`
	session = "0::/user.slice/user-1000.slice/session-4.scope"
)

// proxmoxScope is where Proxmox VE runs VM 100's QEMU.
const proxmoxScope = "0::/qemu.slice/100.scope"

// proxmox is Proxmox VE's QEMU command line for VM 100, vmA, with a vGPU.
func proxmox() []byte {
	return cmdline("/usr/bin/kvm", "-id", "100", "-name", "train,debug-threads=on", "-no-shutdown",
		"-smbios", "type=1,uuid="+vmA, "-device", "vfio-pci,sysfsdev=/sys/bus/mdev/devices/00000000-0000-0000-0000-000000000100,id=hostpci0", "-uuid", vmA)
}

// qemu is a QEMU command line for VM vmA, with the extra arguments.
func qemu(extra ...string) []byte {
	return cmdline(append([]string{"/usr/bin/qemu-system-x86_64", "-name", "guest=vm-train", "-uuid", vmA}, extra...)...)
}

func newFinder(proc, sys string, clock gpu.Clock, logger log.Logger) *Finder {
	return New(Options{Proc: proc, Sys: sys, Clock: clock, Rescan: 10 * time.Second, Logger: logger})
}

func lookup(f *Finder, vm, mdev string) (VM, bool) { return f.Lookup(vm, mdev) }

// The process taken for a VM where more than one claims its UUID, or where
// the one that claims it can be seen not to hold the vGPU: the one that
// holds the vGPU's VFIO device, else the one in a virtual machine's scope
// of systemd-machined, else the one whose command line names the vGPU's
// mediated device; where none stands out, nobody's, and the log says why.
func TestFinderPicksTheVMsProcess(t *testing.T) {
	sysfsdev := "vfio-pci,id=hostdev0,sysfsdev=/sys/bus/mdev/devices/" + mdevA
	jsonDev := `{"driver":"vfio-pci","id":"hostdev0","sysfsdev":"/sys/bus/mdev/devices/` + mdevA + `"}`
	for _, tc := range []struct {
		name  string
		procs map[int]fakeProc
		mdev  string // the vGPU's mdev UUID NVML gives ("": none)
		group string // its IOMMU group in sysfs ("": none)
		cdev  string // its VFIO cdev in sysfs ("": none)
		want  uint32 // 0: nobody's
		log   string // in the log line, where one is due
	}{
		{name: "alone, as before", procs: map[int]fakeProc{200: {cmd: qemu()}}, want: 200},
		{name: "libvirt's QEMU and a user's own", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: libvirt},
			300: {cmd: qemu(), cgroup: session},
		}, want: 200, log: "PID 300"},
		{name: "the user's started first", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: session},
			400: {cmd: qemu(), cgroup: libvirt},
		}, want: 400},
		{name: "a machine scope read through a cgroup namespace", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: `0::/../../machine.slice/machine-qemu\x2d1\x2dtrain.scope/libvirt/emulator`},
			300: {cmd: qemu(), cgroup: "0::/system.slice/debug.service"},
		}, want: 200},
		{name: "a v1 host: name=systemd's path", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: "4:memory:/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope\n1:name=systemd:/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope"},
			300: {cmd: qemu(), cgroup: "4:memory:/user.slice\n1:name=systemd:/user.slice/user-0.slice/session-2.scope"},
		}, want: 200},
		{name: "two in machine scopes", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: libvirt},
			300: {cmd: qemu(), cgroup: `0::/machine.slice/machine-qemu\x2d2\x2dcopy.scope/libvirt/emulator`},
		}, want: 0, log: "PID 200"},
		// a machine scope a user made in the subtree delegated to them is
		// no evidence: against a QEMU outside any machine scope, two alike
		{name: "a user's own machine scope", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: "0::/system.slice/debug.service"},
			300: {cmd: qemu(), cgroup: `0::/user.slice/user-1000.slice/user@1000.service/app.slice/machine.slice/machine-evil.scope`},
		}, want: 0, log: "PID 300"},
		{name: "a user's machine scope against libvirt's", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: `0::/user.slice/user-1000.slice/user@1000.service/machine.slice/machine-qemu\x2d1\x2dtrain.scope`},
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200, log: "PID 150"},
		// nor is one a service made in the subtree delegated to it
		// (Delegate=yes), nor a container in its own: every cgroup above
		// the scope must be a slice
		{name: "a service's own machine scope against libvirt's", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: `0::/system.slice/tenant.service/machine.slice/machine-qemu\x2d1\x2dvictim.scope`},
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200, log: "PID 150"},
		{name: "a container's own machine scope against libvirt's", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: `0::/system.slice/docker-0123456789ab.scope/machine.slice/machine-qemu\x2d1\x2dvictim.scope`},
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200, log: "PID 150"},
		// nor a container's scope that systemd-nspawn registers (slices
		// alone above it): its root runs the payload below it, or, on
		// cgroup v1, in it; nor a subgroup of a VM's scope that libvirt
		// does not make
		{name: "a registered container's payload against libvirt's", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: `0::/machine.slice/machine-tenantbox.scope/payload/system.slice/fake.service`},
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200, log: "PID 150"},
		{name: "a registered container's scope against libvirt's", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: "4:memory:/machine.slice/machine-tenantbox.scope\n1:name=systemd:/machine.slice/machine-tenantbox.scope"},
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200, log: "PID 150"},
		{name: "a subgroup of a VM's scope not libvirt's", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: `0::/machine.slice/machine-qemu\x2d1\x2dtrain.scope/payload/x`},
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200, log: "PID 150"},
		{name: "libvirt's vCPU thread group on a v1 host", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: "4:memory:/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope/vcpu0\n1:name=systemd:/machine.slice/machine-qemu\\x2d1\\x2dtrain.scope"},
			300: {cmd: qemu(), cgroup: session},
		}, want: 200, log: "PID 300"},
		// Proxmox VE's VM: its QEMU (kvm -id VMID) in the scope of its
		// VMID in the root's qemu.slice, cgroup v2 or v1
		{name: "Proxmox's QEMU and a user's own", procs: map[int]fakeProc{
			200: {cmd: proxmox(), cgroup: proxmoxScope},
			300: {cmd: qemu(), cgroup: session},
		}, want: 200, log: "/qemu.slice/100.scope"},
		{name: "Proxmox's QEMU on a v1 host", procs: map[int]fakeProc{
			150: {cmd: qemu(), cgroup: "4:memory:/user.slice\n1:name=systemd:/user.slice/user-0.slice/session-2.scope"},
			200: {cmd: proxmox(), cgroup: "4:memory:/qemu.slice/100.scope\n1:name=systemd:/qemu.slice/100.scope"},
		}, want: 200},
		{name: "a user's qemu.slice against Proxmox's", procs: map[int]fakeProc{
			150: {cmd: proxmox(), cgroup: "0::/user.slice/user-1000.slice/user@1000.service/qemu.slice/100.scope"},
			200: {cmd: proxmox(), cgroup: proxmoxScope},
		}, want: 200, log: "PID 150"},
		{name: "two in sessions, nothing else told", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session},
			300: {cmd: qemu(), cgroup: session},
		}, want: 0, log: "PID 300"},
		{name: "the one holding the vGPU's VFIO group", mdev: mdevA, group: "12", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session, fds: []string{"/dev/null", "/dev/vfio/vfio", "/dev/vfio/12"}},
			300: {cmd: qemu(), cgroup: session, fds: []string{"/dev/null", "/dev/vfio/vfio", "/dev/vfio/13"}},
		}, want: 200, log: "/dev/vfio/12"},
		{name: "the holder over a machine scope", mdev: mdevA, group: "12", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: libvirt},
			300: {cmd: qemu(), cgroup: session, fds: []string{"/dev/vfio/12"}},
		}, want: 300},
		{name: "the holder of its VFIO cdev (iommufd)", mdev: mdevA, cdev: "vfio3", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session, fds: []string{"/dev/iommu", "/dev/vfio/devices/vfio3"}},
			300: {cmd: qemu(), cgroup: session, fds: []string{"/dev/iommu", "/dev/vfio/devices/vfio4"}},
		}, want: 200},
		{name: "alone, seen not to hold the vGPU", mdev: mdevA, group: "12", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session, fds: []string{"/dev/null", "/dev/pts/3"}},
		}, want: 0, log: "none of them holds"},
		{name: "one seen not to hold it, the other unreadable", mdev: mdevA, group: "12", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session},
			300: {cmd: qemu(), cgroup: session, fds: []string{"/dev/null"}},
		}, want: 200},
		{name: "alone, its files unreadable", mdev: mdevA, group: "12", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: libvirt},
		}, want: 200},
		{name: "alone, no device in sysfs (no mdev)", mdev: mdevA, procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session, fds: []string{"/dev/null"}},
		}, want: 200},
		{name: "the one naming the vGPU's mdev", mdev: mdevA, procs: map[int]fakeProc{
			200: {cmd: qemu("-device", sysfsdev), cgroup: session},
			300: {cmd: qemu(), cgroup: session},
		}, want: 200},
		{name: "naming it in libvirt's JSON form", mdev: mdevA, procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: session},
			300: {cmd: qemu("-device", strings.ToUpper(jsonDev)), cgroup: session},
		}, want: 300},
		{name: "a machine scope over naming the mdev", mdev: mdevA, procs: map[int]fakeProc{
			200: {cmd: qemu("-device", sysfsdev), cgroup: session},
			300: {cmd: qemu("-device", sysfsdev), cgroup: libvirt},
		}, want: 300},
		{name: "two naming it, neither in a machine scope", mdev: mdevA, procs: map[int]fakeProc{
			200: {cmd: qemu("-device", sysfsdev), cgroup: session},
			300: {cmd: qemu("-device", sysfsdev), cgroup: session},
		}, want: 0},
		{name: "two holding it (no real VFIO group opens twice)", mdev: mdevA, group: "12", procs: map[int]fakeProc{
			200: {cmd: qemu(), cgroup: libvirt, fds: []string{"/dev/vfio/12"}},
			300: {cmd: qemu(), cgroup: session, fds: []string{"/dev/vfio/12"}},
		}, want: 0, log: "2 of them hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := proc(t, nil)
			writeProcs(t, root, tc.procs)
			sys := t.TempDir()
			if tc.mdev != "" {
				sys = fakeSys(t, tc.mdev, tc.group, tc.cdev)
			}
			logs := &testutil.SyncBuffer{}
			f := newFinder(root, sys, gpu.NewManualClock(time.Unix(1e9, 0)), log.NewLogfmtLogger(logs))
			vm, ok := lookup(f, vmA, tc.mdev)
			if ok != (tc.want != 0) || vm.PID != tc.want {
				t.Errorf("Lookup = %+v, %v; want PID %d", vm, ok, tc.want)
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q; want a line with %q", logs.String(), tc.log)
			}
		})
	}
}

// A user's copy of a running VM's command line, started after the VM was
// found, does not take the VM from its process at the next scan.
func TestFinderKeepsTheVMWhenACopyAppears(t *testing.T) {
	root := proc(t, nil)
	writeProcs(t, root, map[int]fakeProc{200: {cmd: qemu(), cgroup: libvirt}})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	f := newFinder(root, t.TempDir(), clock, log.NewNopLogger())
	if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 200 {
		t.Fatalf("Lookup = %+v, %v; want PID 200", vm, ok)
	}
	writeProcs(t, root, map[int]fakeProc{900: {cmd: qemu(), cgroup: session}})
	clock.Advance(10 * time.Second)
	lookup(f, "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "") // unknown: scans again
	if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 200 {
		t.Fatalf("Lookup after a copy appeared = %+v, %v; want PID 200", vm, ok)
	}
}

// A VM nobody's for the same reason is logged once, not at every lookup
// or scan; once it is found, that is logged too.
func TestFinderSaysWhyOnce(t *testing.T) {
	root := proc(t, nil)
	writeProcs(t, root, map[int]fakeProc{
		200: {cmd: qemu(), cgroup: session},
		300: {cmd: qemu(), cgroup: session},
	})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	logs := &testutil.SyncBuffer{}
	f := newFinder(root, t.TempDir(), clock, log.NewLogfmtLogger(logs))
	for range 3 {
		if vm, ok := lookup(f, vmA, ""); ok {
			t.Fatalf("Lookup = %+v with two claimants", vm)
		}
		clock.Advance(10 * time.Second)
	}
	if n := strings.Count(logs.String(), vmA); n != 1 {
		t.Errorf("%d lines name the VM, want 1:\n%s", n, logs.String())
	}
	writeProcs(t, root, map[int]fakeProc{300: {cmd: cmdline("/bin/bash")}})
	if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 200 {
		t.Fatalf("Lookup once the copy went = %+v, %v", vm, ok)
	}
	if n := strings.Count(logs.String(), vmA); n != 2 {
		t.Errorf("%d lines name the VM, want 2 (refused, then found):\n%s", n, logs.String())
	}
}

// A process taken for a VM on no evidence (it alone claimed the VM, and
// nothing about it tells) is looked at again at each rescan, so that the
// VM's own process, once it runs, takes it over; one taken on evidence
// is kept without a scan.
func TestFinderRevisitsAChoiceWithoutEvidence(t *testing.T) {
	root := proc(t, nil)
	writeProcs(t, root, map[int]fakeProc{300: {cmd: qemu(), cgroup: session}})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	f := newFinder(root, t.TempDir(), clock, log.NewNopLogger())
	scans := 0
	f.scanHook = func() { scans++ }
	if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 300 {
		t.Fatalf("Lookup = %+v, %v; want PID 300, alone", vm, ok)
	}
	writeProcs(t, root, map[int]fakeProc{200: {cmd: qemu(), cgroup: libvirt}})
	clock.Advance(10 * time.Second)
	// the lookup that finds a rescan due does not wait for it (it may be
	// the sampler's, under the backend's lock): the scan blocks until
	// released, and the lookup answers as before
	release := make(chan struct{})
	f.scanHook = func() { scans++; <-release }
	if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 300 {
		t.Fatalf("Lookup as the rescan starts = %+v, %v; want PID 300, as before", vm, ok)
	}
	close(release)
	f.bg.Wait()
	f.scanHook = func() { scans++ }
	if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 200 {
		t.Fatalf("Lookup a rescan after libvirt's QEMU appeared = %+v, %v; want PID 200 (machine scope)", vm, ok)
	}
	before := scans
	for range 3 {
		clock.Advance(10 * time.Second)
		if vm, ok := lookup(f, vmA, ""); !ok || vm.PID != 200 {
			t.Fatalf("Lookup = %+v, %v; want PID 200", vm, ok)
		}
	}
	if scans != before {
		t.Errorf("%d scans for a VM found on evidence, want none", scans-before)
	}
}

// A plain choice is not logged: one process, which holds the vGPU's
// device; nor is a VM with two vGPUs logged again at every rescan for
// each of them.
func TestFinderQuietOnPlainChoices(t *testing.T) {
	root := proc(t, nil)
	const mdevB = "b1a2c3d4-0000-4000-8000-00000000000b"
	writeProcs(t, root, map[int]fakeProc{
		200: {cmd: qemu(), cgroup: libvirt, fds: []string{"/dev/vfio/12", "/dev/vfio/13"}},
		300: {cmd: qemu(), cgroup: session, fds: []string{"/dev/null"}},
	})
	sys := fakeSys(t, mdevA, "12", "")
	dirB := filepath.Join(sys, "bus", "mdev", "devices", mdevB)
	if err := os.MkdirAll(dirB, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../kernel/iommu_groups/13", filepath.Join(dirB, "iommu_group")); err != nil {
		t.Fatal(err)
	}
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	logs := &testutil.SyncBuffer{}
	f := newFinder(root, sys, clock, log.NewLogfmtLogger(logs))
	for range 5 {
		for _, m := range []string{mdevA, mdevB} {
			if vm, ok := lookup(f, vmA, m); !ok || vm.PID != 200 {
				t.Fatalf("Lookup(%s) = %+v, %v; want PID 200", m, vm, ok)
			}
		}
		clock.Advance(10 * time.Second)
		lookup(f, "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "") // unknown: scans again
	}
	if n := strings.Count(logs.String(), vmA); n > 2 {
		t.Errorf("%d lines name the VM after 5 rescans, want at most 2 (one a vGPU):\n%s", n, logs.String())
	}

	alone := proc(t, nil)
	writeProcs(t, alone, map[int]fakeProc{200: {cmd: qemu(), cgroup: libvirt, fds: []string{"/dev/vfio/12"}}})
	logs2 := &testutil.SyncBuffer{}
	g := newFinder(alone, fakeSys(t, mdevA, "12", ""), clock, log.NewLogfmtLogger(logs2))
	if vm, ok := lookup(g, vmA, mdevA); !ok || vm.PID != 200 {
		t.Fatalf("Lookup = %+v, %v; want PID 200", vm, ok)
	}
	if logs2.String() != "" {
		t.Errorf("logged for the only claimant, which holds the device: %s", logs2.String())
	}
}

// A claimant with more open files than the finder looks at tells nothing
// by them (the device may be among those not looked at): not refused for
// not holding the vGPU.
func TestFinderBoundsOpenFiles(t *testing.T) {
	root := proc(t, nil)
	many := make([]string, maxOpenFiles+1)
	for i := range many {
		many[i] = "/dev/null"
	}
	writeProcs(t, root, map[int]fakeProc{300: {cmd: qemu(), cgroup: session, fds: many}})
	f := newFinder(root, fakeSys(t, mdevA, "12", ""), gpu.NewManualClock(time.Unix(1e9, 0)), log.NewNopLogger())
	if got := f.holding(300, []string{"/dev/vfio/12"}); got != holdUnknown {
		t.Errorf("holding over %d open files = %d, want unknown (%d)", maxOpenFiles, got, holdUnknown)
	}
	if vm, ok := lookup(f, vmA, mdevA); !ok || vm.PID != 300 {
		t.Errorf("Lookup = %+v, %v; want PID 300 (alone, its files telling nothing)", vm, ok)
	}
}
