// Package vmproc finds, on a KVM virtualization host, the process that
// runs a virtual machine (its QEMU) from the VM's UUID, which is how NVML
// names the VM a vGPU serves (nvmlVgpuInstanceGetVmID, type UUID), and
// reads the VM's name from that process's command line. A VM is paused as
// a whole through that process: its vCPUs stop launching GPU work.
//
// QEMU is started with "-uuid UUID" (libvirt always passes it) and "-name
// guest=NAME,..." or "-name NAME,..." (commas in a name doubled). The
// finder scans procfs for such processes, keeps what it found, checks a
// kept process's command line again on every lookup (a PID is reused once
// its VM stops) and scans again for a VM it does not know at most once
// every Rescan, without its lock: a lookup of a known VM never waits for a
// scan. A UUID two processes claim is nobody's.
package vmproc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
)

// DefaultRescan is how often, at most, procfs is scanned for a VM the
// finder does not know.
const DefaultRescan = 10 * time.Second

// maxCmdline bounds a command line read (procfs files are read with the
// project's bounded reader, internal/fileread): QEMU's run to a few
// kilobytes; a longer one than this is not a VM's.
const maxCmdline = 1 << 20

// VM is a virtual machine's host process.
type VM struct {
	// PID is the QEMU process on the host.
	PID uint32
	// UUID is the VM's UUID (lower case), Name its name ("" when the
	// command line has none).
	UUID, Name string
}

// Finder finds VMs' processes under a procfs root.
type Finder struct {
	proc   string
	clock  gpu.Clock
	rescan time.Duration

	mu       sync.Mutex
	byUUID   map[string]VM
	scanned  bool
	scanning bool // a scan runs (outside mu): another lookup does not wait for it
	lastScan time.Time

	scanHook func() // called as a scan starts (tests)
}

// New returns a Finder reading procRoot ("/proc" when empty), scanning at
// most every rescan (DefaultRescan when 0) on clock (gpu.RealClock when
// nil).
func New(procRoot string, clock gpu.Clock, rescan time.Duration) *Finder {
	if procRoot == "" {
		procRoot = "/proc"
	}
	if clock == nil {
		clock = gpu.RealClock{}
	}
	if rescan <= 0 {
		rescan = DefaultRescan
	}
	return &Finder{proc: procRoot, clock: clock, rescan: rescan, byUUID: map[string]VM{}}
}

// Find returns the PID and name of the process that runs the VM of UUID
// vmUUID (Lookup's, as gpu/nvml asks).
func (f *Finder) Find(vmUUID string) (pid uint32, name string, ok bool) {
	vm, ok := f.Lookup(vmUUID)
	return vm.PID, vm.Name, ok
}

// Lookup returns the process that runs the VM of UUID vmUUID; false when
// no QEMU process on the host has it.
func (f *Finder) Lookup(vmUUID string) (VM, bool) {
	id := strings.ToLower(strings.TrimSpace(vmUUID))
	if id == "" {
		return VM{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if vm, ok := f.byUUID[id]; ok {
		if f.still(vm) {
			return vm, true
		}
		delete(f.byUUID, id)
	}
	now := f.clock.Now()
	if f.scanning || f.scanned && now.Sub(f.lastScan) < f.rescan {
		return VM{}, false
	}
	// the scan reads every process's command line: without the lock, so
	// that a lookup of a known VM (the sampler's, every sample) never
	// waits for it
	f.scanning, f.lastScan = true, now
	f.mu.Unlock()
	if f.scanHook != nil {
		f.scanHook()
	}
	found := f.scan()
	f.mu.Lock()
	f.byUUID, f.scanned, f.scanning = found, true, false
	vm, ok := f.byUUID[id]
	return vm, ok
}

// still says whether vm's process runs vm still.
func (f *Finder) still(vm VM) bool {
	got, ok := f.read(vm.PID)
	return ok && got.UUID == vm.UUID
}

// scan returns the QEMU processes under proc, by VM UUID (none where
// procfs cannot be read).
func (f *Finder) scan() map[string]VM {
	ents, err := os.ReadDir(f.proc)
	if err != nil {
		return map[string]VM{}
	}
	found, dup := map[string]VM{}, map[string]bool{}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || pid == 0 {
			continue
		}
		if vm, ok := f.read(uint32(pid)); ok {
			if _, seen := found[vm.UUID]; seen {
				dup[vm.UUID] = true
			}
			found[vm.UUID] = vm
		}
	}
	for id := range dup {
		// two processes claim one VM: neither is taken for it (a VM is
		// paused through its process only where there is no doubt)
		delete(found, id)
	}
	return found
}

// read parses pid's command line; false when it is not a QEMU process
// with a UUID.
func (f *Finder) read(pid uint32) (VM, bool) {
	buf, err := fileread.Regular(filepath.Join(f.proc, strconv.FormatUint(uint64(pid), 10), "cmdline"), maxCmdline)
	if err != nil {
		return VM{}, false
	}
	uuid, name, ok := ParseCmdline(buf)
	if !ok {
		return VM{}, false
	}
	return VM{PID: pid, UUID: uuid, Name: name}, true
}

// ParseCmdline reads a QEMU command line as /proc/PID/cmdline holds it
// (arguments ended by NUL bytes): the VM's UUID (lower case) and name.
// False when the program is not QEMU (no "qemu" in its file name, nor
// "kvm", as Debian's and Proxmox's wrapper is named) or has no well-formed
// UUID.
func ParseCmdline(b []byte) (uuid, name string, ok bool) {
	args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	if prog := filepath.Base(args[0]); !strings.Contains(prog, "qemu") && prog != "kvm" {
		return "", "", false
	}
	for i := 1; i+1 < len(args); i++ {
		opt := args[i]
		if strings.HasPrefix(opt, "--") {
			opt = opt[1:] // QEMU takes "--opt value" as "-opt value"
		}
		switch opt {
		case "-uuid":
			i++
			if validUUID(args[i]) {
				uuid = strings.ToLower(args[i])
			}
		case "-name":
			i++
			name = vmName(args[i])
		}
	}
	return uuid, name, uuid != ""
}

// vmName is the name in a -name value: "guest=NAME,..." or "NAME,...",
// where a doubled comma is one comma of the name.
func vmName(v string) string {
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == ',' {
			if i+1 < len(v) && v[i+1] == ',' {
				cur.WriteByte(',')
				i++
				continue
			}
			fields = append(fields, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(v[i])
	}
	fields = append(fields, cur.String())
	name := ""
	if !strings.Contains(fields[0], "=") {
		name = fields[0] // the legacy form, "NAME,..."
	}
	for _, f := range fields {
		if n, ok := strings.CutPrefix(f, "guest="); ok {
			name = n // guest= names it, the last one given
		}
	}
	return name
}

// validUUID says whether s is a UUID in its 8-4-4-4-12 hexadecimal form.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
