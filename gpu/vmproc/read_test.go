package vmproc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// stall reads a fake procfs, its file path blocking until release is
// closed, as a read of a process in uninterruptible sleep does.
type stall struct {
	path    string
	entered chan struct{} // told of each read of path as it blocks
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	calls int
}

func newStall(t *testing.T, path string) *stall {
	s := &stall{path: path, entered: make(chan struct{}, 16), release: make(chan struct{})}
	t.Cleanup(s.free)
	return s
}

func (s *stall) read(path string, limit int64) ([]byte, error) {
	s.block(path)
	return fileread.Regular(path, limit)
}

// links reads a process's fd directory as the finder does, blocking as
// read does.
func (s *stall) links(dir string, max int) ([]byte, error) {
	s.block(dir)
	return fdTargets(dir, max)
}

// block blocks a read of path until release is closed, where path is the
// one that hangs.
func (s *stall) block(path string) {
	if path == s.path {
		s.mu.Lock()
		s.calls++
		s.mu.Unlock()
		s.entered <- struct{}{}
		<-s.release
	}
}

func (s *stall) free() { s.once.Do(func() { close(s.release) }) }

func (s *stall) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// within fails the test when ch has nothing within 5 s: a guard against a
// hang, which a lookup that waits for a stuck read is.
func within[T any](t *testing.T, ch <-chan T, what string) (T, bool) {
	t.Helper()
	select {
	case v := <-ch:
		return v, true
	case <-time.After(5 * time.Second):
		t.Errorf("%s: still waiting after 5 s", what)
		var zero T
		return zero, false
	}
}

func lookupAsync(f *Finder, vm string) <-chan VM {
	ch := make(chan VM, 1)
	go func() {
		v, _ := f.Lookup(vm, "")
		ch <- v // PID 0: not found
	}()
	return ch
}

// The command line of a known VM's QEMU cannot be read (the process is in
// uninterruptible sleep): another VM's lookup does not wait for it, the
// VM's own is answered (not found) once the read is past its deadline, and
// its process is not read again until that read ends; then it is found as
// before, without a scan.
func TestFinderStuckProcess(t *testing.T) {
	const vmB = "11111111-2222-3333-4444-555555555555"
	root := proc(t, map[int][]byte{
		200: cmdline("qemu-kvm", "-uuid", vmA),
		300: cmdline("qemu-kvm", "-uuid", vmB),
	})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	logs := &testutil.SyncBuffer{}
	f := New(Options{Proc: root, Clock: clock, Rescan: time.Hour, ReadTimeout: time.Second, Logger: log.NewLogfmtLogger(logs)})
	for _, id := range []string{vmA, vmB} {
		if _, ok := f.Lookup(id, ""); !ok {
			t.Fatalf("%s not found", id)
		}
	}
	s := newStall(t, filepath.Join(root, "200", "cmdline"))
	f.readFile = s.read

	a := lookupAsync(f, vmA)
	if _, ok := within(t, s.entered, "the read of PID 200"); !ok {
		return
	}
	if vm, ok := within(t, lookupAsync(f, vmB), "another VM's lookup while PID 200 hangs"); ok && vm.PID != 300 {
		t.Errorf("Lookup(B) while PID 200 hangs = %+v", vm)
	}
	clock.Advance(time.Second) // the read's deadline
	if vm, ok := within(t, a, "the stuck VM's lookup past the deadline"); ok && vm.PID != 0 {
		t.Errorf("Lookup(A) past the deadline = %+v, want not found", vm)
	}
	for range 3 {
		if vm, ok := within(t, lookupAsync(f, vmA), "the stuck VM's lookup again"); ok && vm.PID != 0 {
			t.Errorf("Lookup(A) again = %+v, want not found", vm)
		}
	}
	if n := s.reads(); n != 1 {
		t.Errorf("PID 200's command line read %d times while the first read hangs, want 1", n)
	}
	if n := strings.Count(logs.String(), "not read in time"); n != 1 || !strings.Contains(logs.String(), "pid=200") {
		t.Errorf("%d lines of the stuck read, want 1 naming PID 200:\n%s", n, logs)
	}
	s.free()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if vm, _ := f.Lookup(vmA, ""); vm.PID == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("A not found again 5 s after its read ended")
		}
	}
}

// Lookups of a VM while its QEMU's command line hangs read it once: a
// lookup that comes while the read is under way waits for that read (the
// finder's reads join), and each gives up at its own deadline; once the
// read ends, the VM is found as before.
func TestFinderJoinsAReadUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := proc(t, map[int][]byte{200: cmdline("qemu-kvm", "-uuid", vmA)})
		clock := gpu.NewManualClock(time.Unix(1e9, 0))
		f := New(Options{Proc: root, Clock: clock, Rescan: time.Hour, ReadTimeout: time.Second})
		if _, ok := f.Lookup(vmA, ""); !ok {
			t.Fatal("A not found")
		}
		s := newStall(t, filepath.Join(root, "200", "cmdline"))
		f.readFile = s.read
		lookups := []<-chan VM{lookupAsync(f, vmA), lookupAsync(f, vmA)}
		synctest.Wait() // both under way, waiting on the clock
		if n := s.reads(); n != 1 {
			t.Errorf("PID 200's command line read %d times by two lookups at once, want 1", n)
		}
		clock.Advance(time.Second) // their deadlines
		for _, l := range lookups {
			if vm := <-l; vm.PID != 0 {
				t.Errorf("Lookup(A) past the deadline = %+v, want not found", vm)
			}
		}
		s.free()
		synctest.Wait()
		if vm, _ := f.Lookup(vmA, ""); vm.PID != 200 {
			t.Errorf("Lookup(A) once the read ended = %+v, want PID 200", vm)
		}
	})
}

// A scan reads every process's command line: one that hangs (a shell on a
// hung mount) is passed over at its deadline and the scan ends; the next
// scan passes it over at once, not reading it again while it hangs.
func TestFinderScanPastStuckProcess(t *testing.T) {
	const vmC = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	root := proc(t, map[int][]byte{
		100: cmdline("/bin/bash"),
		200: cmdline("qemu-kvm", "-uuid", vmA),
	})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	f := New(Options{Proc: root, Clock: clock, Rescan: 10 * time.Second, ReadTimeout: time.Second})
	s := newStall(t, filepath.Join(root, "100", "cmdline"))
	f.readFile = s.read

	a := lookupAsync(f, vmA) // scans
	if _, ok := within(t, s.entered, "the read of PID 100"); !ok {
		return
	}
	clock.Advance(time.Second)
	if vm, ok := within(t, a, "a scan past a stuck process"); ok && vm.PID != 200 {
		t.Errorf("Lookup(A) = %+v, want PID 200", vm)
	}
	write(t, root, 400, cmdline("qemu-kvm", "-uuid", vmC))
	clock.Advance(10 * time.Second)
	if vm, ok := within(t, lookupAsync(f, vmC), "a second scan while PID 100 hangs"); ok && vm.PID != 400 {
		t.Errorf("Lookup(C) = %+v, want PID 400", vm)
	}
	if n := s.reads(); n != 1 {
		t.Errorf("PID 100's command line read %d times while the first read hangs, want 1", n)
	}
}

// A claimant's other procfs files (its status and cgroup, read at a scan,
// and the links in its fd, read at a lookup) are read as its command line
// is: one that hangs is waited for at most the read's bound, the VM not
// found meanwhile (nothing is known of its process) and the file not read
// again while it hangs, logged once naming the process and the file; once
// the read ends, the VM is found as before, without a scan.
func TestFinderStuckClaimantFiles(t *testing.T) {
	for _, file := range []string{"status", "cgroup", "fd"} {
		t.Run(file, func(t *testing.T) {
			root := proc(t, nil)
			writeProcs(t, root, map[int]fakeProc{200: {cmd: qemu(), cgroup: libvirt, fds: []string{"/dev/null", "/dev/vfio/12"}}})
			writeStatus(t, root, 200, 107)
			clock := gpu.NewManualClock(time.Unix(1e9, 0))
			logs := &testutil.SyncBuffer{}
			f := New(Options{Proc: root, Sys: fakeSys(t, mdevA, "12", ""), Clock: clock, Rescan: time.Hour, ReadTimeout: time.Second,
				Logger: log.NewLogfmtLogger(logs)})
			s := newStall(t, filepath.Join(root, "200", file))
			f.readFile, f.readLinks = s.read, s.links
			lookupA := func() <-chan VM {
				ch := make(chan VM, 1)
				go func() {
					v, _ := f.Lookup(vmA, mdevA)
					ch <- v // PID 0: not found
				}()
				return ch
			}

			a := lookupA()
			if _, ok := within(t, s.entered, "the read of PID 200's "+file); !ok {
				return
			}
			clock.Advance(time.Second) // the read's deadline
			if vm, ok := within(t, a, "the lookup past the deadline"); ok && vm.PID != 0 {
				t.Errorf("Lookup(A) past the deadline = %+v, want not found", vm)
			}
			for range 3 {
				if vm, ok := within(t, lookupA(), "the lookup again"); ok && vm.PID != 0 {
					t.Errorf("Lookup(A) again = %+v, want not found", vm)
				}
			}
			if n := s.reads(); n != 1 {
				t.Errorf("PID 200's %s read %d times while the first read hangs, want 1", file, n)
			}
			if n := strings.Count(logs.String(), "not read in time"); n != 1 || !strings.Contains(logs.String(), "pid=200 file="+file+" ") {
				t.Errorf("%d lines of the stuck read, want 1 naming PID 200 and its %s:\n%s", n, file, logs)
			}
			s.free()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				if vm, _ := f.Lookup(vmA, mdevA); vm.PID == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("A not found again 5 s after its read ended")
				}
			}
		})
	}
}

// What a scan and a lookup read of a claimant that answers is what they
// read before their reads were bounded: its UID and cgroup as
// kube.ProcReader reads them, and the vGPU's device among its open files.
func TestScanReadsClaimantsFiles(t *testing.T) {
	root := proc(t, nil)
	writeProcs(t, root, map[int]fakeProc{200: {cmd: qemu(), cgroup: libvirt, fds: []string{"/dev/null", "/dev/vfio/12"}}})
	writeStatus(t, root, 200, 107)
	f := New(Options{Proc: root, Clock: gpu.NewManualClock(time.Unix(1e9, 0))})
	cs := f.scan()[vmA]
	if len(cs) != 1 {
		t.Fatalf("claimants of A: %+v", cs)
	}
	pr := kube.NewProcReader(root)
	pcg, err := pr.Cgroup(200)
	if err != nil {
		t.Fatal(err)
	}
	cg := pcg.Path
	if c := cs[0]; c.uid != 107 || c.uid != pr.UID(200) || c.cgroup != cg || c.scope != systemMachineScope(cg) || c.cgroupLate {
		t.Errorf("claimant %+v, want uid 107, cgroup %q", c, cg)
	}
	for _, tc := range []struct {
		nodes []string
		want  holding
	}{
		{[]string{"/dev/vfio/12", "/dev/vfio/devices/vfio3"}, holds},
		{[]string{"/dev/vfio/13"}, holdsNot},
		{nil, holdUnknown},
	} {
		if got := f.holding(200, tc.nodes); got != tc.want {
			t.Errorf("holding(%v) = %d, want %d", tc.nodes, got, tc.want)
		}
	}
	if got := f.holding(201, []string{"/dev/vfio/12"}); got != holdUnknown {
		t.Errorf("holding of a process with no fd directory = %d, want unknown (%d)", got, holdUnknown)
	}
}

// writeStatus writes process pid's /proc/PID/status with its real UID.
func writeStatus(t *testing.T, root string, pid, uid int) {
	t.Helper()
	status := fmt.Sprintf("Name:\tqemu\nUid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid)
	if err := os.WriteFile(filepath.Join(root, strconv.Itoa(pid), "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A VM's process found is the process that was, by its start time: a PID
// taken again by another process that claims the VM (the VM restarted
// under another PID) is not the VM's.
func TestFinderPIDReused(t *testing.T) {
	qemuA := cmdline("qemu-kvm", "-uuid", vmA)
	for _, tc := range []struct {
		name string
		then func(t *testing.T, root string) // after the first lookup
		want uint32
	}{
		{"the same process", func(*testing.T, string) {}, 200},
		{"PID 200 taken again", func(t *testing.T, root string) {
			// the VM's QEMU restarted as PID 300, in its machine scope;
			// PID 200 is another's process claiming the VM, in a user's
			// session
			writeProcs(t, root, map[int]fakeProc{200: {cmd: qemuA, cgroup: session}, 300: {cmd: qemuA, cgroup: libvirt}})
			writeStarted(t, root, 200, qemuA, "2000")
			writeStarted(t, root, 300, qemuA, "3000")
		}, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := proc(t, nil)
			writeProcs(t, root, map[int]fakeProc{200: {cmd: qemuA, cgroup: libvirt}})
			clock := gpu.NewManualClock(time.Unix(1e9, 0))
			f := New(Options{Proc: root, Clock: clock, Rescan: 10 * time.Second})
			if vm, ok := f.Lookup(vmA, ""); !ok || vm.PID != 200 {
				t.Fatalf("Lookup(A) = %+v, %v", vm, ok)
			}
			tc.then(t, root)
			clock.Advance(10 * time.Second)
			if vm, ok := f.Lookup(vmA, ""); !ok || vm.PID != tc.want {
				t.Errorf("Lookup(A) = %+v, %v; want PID %d", vm, ok, tc.want)
			}
		})
	}
}

// A claimant kept until the next scan keeps only what it says of its
// command line, not the command line: 64 QEMUs with command lines of a
// megabyte each, lower case (strings.ToLower returns its input then),
// grow the heap by less than 8 MiB once scanned.
func TestScanKeepsNoCommandLine(t *testing.T) {
	root := proc(t, nil)
	pad := strings.Repeat("x", 1<<20-4096)
	for i := range 64 {
		id := vmA[:30] + strconv.FormatInt(int64(0x100000+i), 16)
		writeStarted(t, root, 1000+i, cmdline("qemu-system-x86_64", "-uuid", id, "-name", "guest=vm"+strconv.Itoa(i),
			"-device", "vfio-pci,sysfsdev=/sys/bus/mdev/devices/"+mdevA, "-append", pad), "1000")
	}
	f := New(Options{Proc: root, Clock: gpu.NewManualClock(time.Unix(1e9, 0))})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	claims := f.scan()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(claims) != 64 {
		t.Fatalf("%d VMs claimed, want 64", len(claims))
	}
	for _, cs := range claims {
		if len(cs) != 1 || len(cs[0].mdevs) != 1 || cs[0].mdevs[0] != mdevA {
			t.Fatalf("claimants %+v", cs)
		}
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew >= 8<<20 {
		t.Errorf("the heap grew by %d MiB for 64 claimants", grew>>20)
	}
	runtime.KeepAlive(claims)
}

// A command line over maxCmdline is passed over and said to be, naming its
// process, once however often it is scanned.
func TestScanLogsLongCommandLine(t *testing.T) {
	root := proc(t, map[int][]byte{
		200: cmdline("qemu-kvm", "-uuid", vmA, "-append", strings.Repeat("x", maxCmdline)),
	})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	logs := &testutil.SyncBuffer{}
	f := New(Options{Proc: root, Clock: clock, Rescan: 10 * time.Second, Logger: log.NewLogfmtLogger(logs)})
	for range 3 {
		if vm, ok := f.Lookup(vmA, ""); ok {
			t.Fatalf("Lookup(A) = %+v, want not found", vm)
		}
		clock.Advance(10 * time.Second)
	}
	if n := strings.Count(logs.String(), "over 1 MiB"); n != 1 || !strings.Contains(logs.String(), "pid=200") {
		t.Errorf("%d lines of the long command line, want 1 naming PID 200:\n%s", n, logs)
	}
}

// TestLegacyHostForgedMachineScope: on a cgroup v1 host with no cgroup2
// mounted (the exporter's own self/cgroup has no "0::" line), a tenant's
// service with a delegated name=systemd subtree names a cgroup
// "x\n0::/machine.slice/machine-qemu\x2d1\x2dvictim.scope" (a kernel
// before 4.13 takes it): the forged line, listed last as a unified line
// is, is no VM's evidence; the file is refused. Before, the process was
// taken for the victim VM's. With cgroup2 mounted the line is the
// kernel's, and the scope is taken.
func TestLegacyHostForgedMachineScope(t *testing.T) {
	const scope = `/machine.slice/machine-qemu\x2d1\x2dvictim.scope`
	file := "11:memory:/system.slice/tenant.service\n2:cpu,cpuacct:/system.slice/tenant.service\n1:name=systemd:/system.slice/tenant.service/x\n0::" + scope
	for _, tc := range []struct {
		name, self, want string
	}{
		{"a legacy host", "11:memory:/\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/vgpu.service\n", ""},
		{"a hybrid host", "11:memory:/\n2:cpu,cpuacct:/\n1:name=systemd:/system.slice/vgpu.service\n0::/system.slice/vgpu.service\n", scope},
	} {
		root := proc(t, nil)
		writeProcs(t, root, map[int]fakeProc{200: {cmd: qemu(), cgroup: file}})
		if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "self", "cgroup"), []byte(tc.self), 0o644); err != nil {
			t.Fatal(err)
		}
		f := New(Options{Proc: root, Clock: gpu.NewManualClock(time.Unix(1e9, 0))})
		cg, s, err := f.readCgroup(200)
		if s != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%s: path %q, scope %q, %v; want scope %q", tc.name, cg, s, err, tc.want)
		}
	}
}
