package vmproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func cmdline(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }

const vmA = "6c0a1e52-3d4f-4a8b-9c2e-7f1b0d3a5e01"

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       []byte
		uuid, vm string
		ok       bool
	}{
		{"libvirt", cmdline("/usr/bin/qemu-system-x86_64", "-name", "guest=vm-train,debug-threads=on", "-S", "-uuid", vmA, "-machine", "q35"), vmA, "vm-train", true},
		{"plain name", cmdline("qemu-kvm", "-name", "vm-chat", "-uuid", strings.ToUpper(vmA)), vmA, "vm-chat", true},
		{"double dash", cmdline("qemu-system-x86_64", "--uuid", vmA, "--name", "a,process=qemu-a"), vmA, "a", true},
		{"escaped comma", cmdline("qemu-system-x86_64", "-uuid", vmA, "-name", "guest=a,,b,debug-threads=on"), vmA, "a,b", true},
		{"name option only", cmdline("qemu-system-x86_64", "-uuid", vmA, "-name", "process=x"), vmA, "", true},
		{"no name", cmdline("qemu-system-x86_64", "-uuid", vmA), vmA, "", true},
		{"no uuid", cmdline("qemu-system-x86_64", "-name", "guest=x"), "", "x", false},
		{"bad uuid", cmdline("qemu-system-x86_64", "-uuid", "not-a-uuid"), "", "", false},
		{"uuid last, no value", cmdline("qemu-system-x86_64", "-uuid"), "", "", false},
		{"not qemu", cmdline("/usr/bin/python3", "-uuid", vmA), "", "", false},
		{"qemu as an argument", cmdline("/bin/sh", "-c", "qemu-system-x86_64 -uuid "+vmA), "", "", false},
		{"empty", nil, "", "", false},
		{"no trailing NUL", []byte("qemu-kvm\x00-uuid\x00" + vmA), vmA, "", true},
		{"Debian's and Proxmox's kvm", cmdline("/usr/bin/kvm", "-id", "100", "-name", "vm100,debug-threads=on", "-uuid", vmA), vmA, "vm100", true},
		{"guest= over the legacy form, the last one", cmdline("qemu-kvm", "-uuid", vmA, "-name", "a,guest=b,guest=c"), vmA, "c", true},
		// a name is a label value: valid UTF-8, at most 253 bytes, cut at a
		// character's start
		{"a name of a megabyte", cmdline("qemu-kvm", "-uuid", vmA, "-name", "guest="+strings.Repeat("a", 1<<20)), vmA, strings.Repeat("a", 253), true},
		{"a long name cut between characters", cmdline("qemu-kvm", "-uuid", vmA, "-name", "a"+strings.Repeat("é", 200)), vmA, "a" + strings.Repeat("é", 126), true},
		{"a name not UTF-8", cmdline("qemu-kvm", "-uuid", vmA, "-name", "guest=vm\xff\xfe1"), vmA, "vm\uFFFD1", true},
		{"past a page", cmdline(append(append([]string{"qemu-system-x86_64"}, strings.Split(strings.Repeat("-device,x,", 900), ",")...), "-uuid", vmA)...), vmA, "", true},
	} {
		uuid, name, ok := ParseCmdline(tc.in)
		if ok != tc.ok || uuid != tc.uuid || (tc.ok && name != tc.vm) {
			t.Errorf("%s: got (%q, %q, %v), want (%q, %q, %v)", tc.name, uuid, name, ok, tc.uuid, tc.vm, tc.ok)
		}
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add(cmdline("qemu-system-x86_64", "-name", "guest=a,,b,debug-threads=on", "-uuid", vmA))
	f.Add(cmdline("qemu-kvm", "--uuid", vmA, "--name"))
	f.Add([]byte{})
	f.Add(cmdline("qemu-kvm", "-uuid", vmA, "-device", "vfio-pci,sysfsdev=/sys/bus/mdev/devices/"+strings.ToUpper(vmA)+",x=/sys/bus/mdev/devices/"))
	f.Fuzz(func(t *testing.T, b []byte) {
		uuid, _, ok := ParseCmdline(b)
		if ok != (uuid != "") || (ok && (!validUUID(uuid) || uuid != strings.ToLower(uuid))) {
			t.Fatalf("ParseCmdline(%q): uuid %q, ok %v", b, uuid, ok)
		}
		c, _ := parse(b)
		for _, m := range c.mdevs {
			if !validUUID(m) || m != strings.ToLower(m) {
				t.Fatalf("parse(%q): mediated device %q", b, m)
			}
		}
	})
}

// proc is a fake procfs: each PID's cmdline.
func proc(t *testing.T, cmds map[int][]byte) string {
	t.Helper()
	root := t.TempDir()
	for pid, c := range cmds {
		write(t, root, pid, c)
	}
	// not processes
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// write makes process pid of the fake procfs under root: its command line
// c and a stat line with start time 1000.
func write(t *testing.T, root string, pid int, c []byte) {
	t.Helper()
	writeStarted(t, root, pid, c, "1000")
}

// writeStarted is write with the process's start time.
func writeStarted(t *testing.T, root string, pid int, c []byte, start string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), c, 0o644); err != nil {
		t.Fatal(err)
	}
	// fields 3 to 22 after the command name: the start time is the 20th
	stat := fmt.Sprintf("%d (qemu) S%s %s 0 0\n", pid, strings.Repeat(" 0", 18), start)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFinder(t *testing.T) {
	const vmB = "11111111-2222-3333-4444-555555555555"
	root := proc(t, map[int][]byte{
		100: cmdline("/usr/sbin/libvirtd"),
		200: cmdline("/usr/bin/qemu-system-x86_64", "-name", "guest=vm-train", "-uuid", vmA),
		300: cmdline("/usr/bin/qemu-system-x86_64", "-name", "guest=vm-chat", "-uuid", vmB),
	})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	f := New(Options{Proc: root, Clock: clock, Rescan: 10 * time.Second})
	if vm, ok := f.Lookup(strings.ToUpper(vmA), ""); !ok || vm != (VM{PID: 200, UUID: vmA, Name: "vm-train"}) {
		t.Fatalf("Find(A) = %+v, %v", vm, ok)
	}
	if vm, ok := f.Lookup(vmB, ""); !ok || vm.PID != 300 || vm.Name != "vm-chat" {
		t.Fatalf("Find(B) = %+v, %v", vm, ok)
	}
	// the VM stops and its PID goes to another program: not found, and a
	// new VM is not looked for until the rescan interval has passed
	write(t, root, 200, cmdline("/bin/bash"))
	const vmC = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	write(t, root, 400, cmdline("qemu-kvm", "-uuid", vmC))
	if vm, ok := f.Lookup(vmA, ""); ok {
		t.Fatalf("Find(A) after its process went = %+v", vm)
	}
	clock.Advance(10 * time.Second)
	if vm, ok := f.Lookup(vmC, ""); !ok || vm.PID != 400 {
		t.Fatalf("Find(C) after the rescan interval = %+v, %v", vm, ok)
	}
	if _, ok := f.Lookup(vmC, ""); !ok {
		t.Fatal("Find(C) again: lost")
	}
	if pid, name, ok := f.Find(vmB, ""); !ok || pid != 300 || name != "vm-chat" {
		t.Fatalf("Find(B) = %d, %q, %v", pid, name, ok)
	}
	if _, ok := f.Lookup("", ""); ok {
		t.Fatal("Find(\"\") found a VM")
	}
	// a second process claims C: nobody's
	write(t, root, 600, cmdline("qemu-kvm", "-uuid", vmC))
	clock.Advance(10 * time.Second)
	if vm, ok := f.Lookup(strings.ToUpper("aaaaaaaa-bbbb-cccc-dddd-ffffffffffff"), ""); ok {
		t.Fatalf("found an unknown VM: %+v", vm)
	}
	if vm, ok := f.Lookup(vmC, ""); ok && vm.PID == 600 {
		t.Fatalf("Lookup(C) with two claimants = %+v", vm)
	}
	clock.Advance(10 * time.Second)
	if vm, ok := f.Lookup(vmC, ""); ok {
		t.Fatalf("Lookup(C) with two claimants after a scan = %+v, want nobody's", vm)
	}
	// no procfs: nothing, no panic
	if _, ok := New(Options{Proc: filepath.Join(root, "missing"), Clock: clock}).Lookup(vmA, ""); ok {
		t.Fatal("found a VM without procfs")
	}
}

func TestFinderRescanLimited(t *testing.T) {
	root := proc(t, map[int][]byte{})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	f := New(Options{Proc: root, Clock: clock, Rescan: 10 * time.Second})
	if _, ok := f.Lookup(vmA, ""); ok {
		t.Fatal("found a VM in an empty procfs")
	}
	write(t, root, 500, cmdline("qemu-kvm", "-uuid", vmA))
	clock.Advance(9 * time.Second)
	if _, ok := f.Lookup(vmA, ""); ok {
		t.Fatal("scanned again within the rescan interval")
	}
	clock.Advance(time.Second)
	if vm, ok := f.Lookup(vmA, ""); !ok || vm.PID != 500 {
		t.Fatalf("Find after the interval = %+v, %v", vm, ok)
	}
}

// On this host's own procfs: a process started as QEMU is with a VM's
// UUID and name (bash, under QEMU's program name) is found by the UUID.
func TestFinderRealProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no procfs")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	const id = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
	cmd := &exec.Cmd{Path: bash, Args: []string{"/usr/bin/qemu-system-x86_64", "-c", "sleep 60; :", "qemu", "-name", "guest=vm-e2e,debug-threads=on", "-uuid", id}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var vm VM
	ok := false
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		vm, ok = New(Options{}).Lookup(strings.ToUpper(id), "") // once the exec is done
	}
	if !ok || int(vm.PID) != cmd.Process.Pid || vm.Name != "vm-e2e" {
		t.Fatalf("Lookup = %+v, %v; want PID %d, vm-e2e", vm, ok, cmd.Process.Pid)
	}
}

// The cost of a lookup on this host's /proc: a VM the finder knows (its
// process's command line read again) and one it does not (a scan of every
// process; done at most every Rescan).
func BenchmarkLookup(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	const id = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f1"
	cmd := &exec.Cmd{Path: bash, Args: []string{"qemu-system-x86_64", "-c", "sleep 60; :", "qemu", "-uuid", id}}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	f := New(Options{})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := New(Options{}).Lookup(id, ""); ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the process never showed its command line")
		}
	}
	b.Run("known", func(b *testing.B) {
		if _, ok := f.Lookup(id, ""); !ok {
			b.Fatal("not found")
		}
		for b.Loop() {
			f.Lookup(id, "")
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			New(Options{}).Lookup(id, "")
		}
	})
}

// A scan runs without the finder's lock: while one goes on, a lookup of a
// known VM is answered at once, and one of another unknown VM does not
// wait for it (it is not found this time).
func TestFinderScanDoesNotBlock(t *testing.T) {
	const vmB = "11111111-2222-3333-4444-555555555555"
	root := proc(t, map[int][]byte{200: cmdline("qemu-kvm", "-uuid", vmA)})
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	f := New(Options{Proc: root, Clock: clock, Rescan: 10 * time.Second})
	if _, ok := f.Lookup(vmA, ""); !ok {
		t.Fatal("A not found")
	}
	clock.Advance(10 * time.Second)
	started, release := make(chan struct{}), make(chan struct{})
	f.scanHook = func() { close(started); <-release }
	done := make(chan bool)
	go func() {
		_, ok := f.Lookup(vmB, "") // unknown: scans
		done <- ok
	}()
	<-started
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if vm, ok := f.Lookup(vmA, ""); !ok || vm.PID != 200 {
			t.Errorf("a known VM during a scan: %+v, %v", vm, ok)
		}
		if _, ok := f.Lookup("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", ""); ok {
			t.Error("an unknown VM found while another lookup scans")
		}
	}()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Error("lookups waited 5 s for another's scan")
	}
	close(release)
	<-answered
	if <-done {
		t.Error("B found: it runs nowhere")
	}
}
