// Package vmproc finds, on a KVM virtualization host, the process that
// runs a virtual machine (its QEMU) from the VM's UUID, which is how NVML
// names the VM a vGPU serves (nvmlVgpuInstanceGetVmID, type UUID), and
// reads the VM's name from that process's command line. A VM is paused as
// a whole through that process: its vCPUs stop launching GPU work.
//
// QEMU is started with "-uuid UUID" (libvirt always passes it; Proxmox VE
// does for a VM with an NVIDIA vGPU, its SMBIOS UUID where set) and "-name
// guest=NAME,..." or "-name NAME,..." (commas in a name doubled). Any user
// may start a program under QEMU's name with a running VM's UUID, so a
// command line alone proves little: where more than one process claims a
// VM, or the one that does can be seen not to hold the vGPU, the finder
// takes the one the evidence singles out (pick.go) and else none, and logs
// why. The finder scans procfs for such processes, keeps what it found,
// checks a kept process's command line and start time again on every
// lookup (a PID is reused once its VM stops: a process started since is
// another, whatever it claims) and scans again for a VM it does not know
// at most once every Rescan, without its lock: a lookup of a known VM
// never waits for a scan. No procfs file is read under the lock, and each
// read of a process's file (its command line, start time, status, cgroup,
// open files) is waited for at most ReadTimeout (read.go): a QEMU stuck in
// the kernel delays no other VM's lookup, nor a scan.
package vmproc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/cgroupfile"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
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

// Options configure New.
type Options struct {
	// Proc is the procfs root ("/proc" when empty), Sys the sysfs root
	// ("/sys" when empty), where a vGPU's mediated device is.
	Proc, Sys string
	// Clock times rescans and reads; gpu.RealClock when nil.
	Clock gpu.Clock
	// Rescan is how often, at most, procfs is scanned for a VM the finder
	// does not know; DefaultRescan when 0.
	Rescan time.Duration
	// ReadTimeout is how long a read of a process's procfs file is waited
	// for (read.go); DefaultReadTimeout when 0.
	ReadTimeout time.Duration
	// Logger is told why a VM's process was chosen among several, or why
	// none was, and of a process whose procfs files cannot be read in
	// time; nil discards.
	Logger log.Logger
}

// key is what a lookup asks: a VM, and the vGPU's mediated device ("" when
// unknown), for a VM may run more than one vGPU.
type key struct{ vm, mdev string }

// Finder finds VMs' processes under a procfs root.
type Finder struct {
	proc, sys   string
	host        *cgroupfile.Host // proc's self/cgroup: what the kernel lists
	clock       gpu.Clock
	rescan      time.Duration
	readTimeout time.Duration
	logger      log.Logger
	lines       *ratelog.Keyed // bounds the lines of unread procfs files

	mu sync.Mutex
	// claims are the QEMU processes of the last scan by VM UUID; found
	// the lookups answered from them (each checked again at every
	// lookup), unsure those of found taken on no evidence (scanned again
	// for once a rescan is due), refused those that found none; all
	// emptied at a scan, which counts gen up
	claims   map[string][]claimant
	found    map[key]claimant
	unsure   map[key]bool
	refused  map[key]bool
	said     map[key]string // what was last logged of a lookup
	scanned  bool
	scanning bool // a scan runs (outside mu): another lookup does not wait for it
	lastScan time.Time
	gen      uint64

	reads *procread.Reader // every read of a process's procfs file (read.go)

	readFile  func(path string, limit int64) ([]byte, error) // fileread.Regular (tests block it)
	readLinks func(dir string, max int) ([]byte, error)      // fdTargets (tests block it)
	scanHook  func()                                         // called as a scan starts (tests)
	bg        sync.WaitGroup                                 // scans in the background (rescanLocked)
}

// New returns a Finder on the options o.
func New(o Options) *Finder {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Sys == "" {
		o.Sys = "/sys"
	}
	if o.Clock == nil {
		o.Clock = gpu.RealClock{}
	}
	if o.Rescan <= 0 {
		o.Rescan = DefaultRescan
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	return &Finder{proc: o.Proc, sys: o.Sys, host: cgroupfile.NewHost(filepath.Join(o.Proc, "self", "cgroup")), clock: o.Clock, rescan: o.Rescan, readTimeout: o.ReadTimeout, logger: o.Logger,
		lines:  ratelog.NewKeyed(logEvery, 16),
		claims: map[string][]claimant{}, found: map[key]claimant{}, unsure: map[key]bool{}, refused: map[key]bool{}, said: map[key]string{},
		reads:    procread.New(procread.Options{Timeout: o.ReadTimeout, After: o.Clock.After, Join: true}),
		readFile: fileread.Regular, readLinks: fdTargets}
}

// Find returns the PID and name of the process that runs the VM of UUID
// vmUUID with the vGPU of mediated device mdevUUID (Lookup's, as gpu/nvml
// asks).
func (f *Finder) Find(vmUUID, mdevUUID string) (pid uint32, name string, ok bool) {
	vm, ok := f.Lookup(vmUUID, mdevUUID)
	return vm.PID, vm.Name, ok
}

// Lookup returns the process that runs the VM of UUID vmUUID, whose vGPU
// is the mediated device mdevUUID ("" when unknown: it is then not told by
// the device); false when no QEMU process on the host has it, or no one
// of those that claim it can be told to be its own.
func (f *Finder) Lookup(vmUUID, mdevUUID string) (VM, bool) {
	k := key{vm: strings.ToLower(strings.TrimSpace(vmUUID)), mdev: strings.ToLower(strings.TrimSpace(mdevUUID))}
	if k.vm == "" {
		return VM{}, false
	}
	if !validUUID(k.mdev) {
		k.mdev = ""
	}
	f.mu.Lock()
	now := f.clock.Now()
	e, known := f.found[k]
	f.mu.Unlock()
	if known {
		switch f.still(e.PID, e.UUID, e.start) { // procfs read without the lock
		case running:
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.unsure[k] && f.due(now) {
				// taken on no evidence: looked for again once a rescan
				// is due (the VM's own process may run now), in the
				// background, this lookup (the sampler's) answered as
				// before
				f.rescanLocked(now, false)
			}
			return e.VM, true
		case unanswered:
			return VM{}, false // not confirmed this time: kept, and checked again at the next lookup
		}
		f.mu.Lock()
		if cur, ok := f.found[k]; ok && cur.PID == e.PID && cur.start == e.start {
			delete(f.found, k)
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	if f.due(now) {
		f.rescanLocked(now, true)
	} else if f.refused[k] {
		f.mu.Unlock()
		return VM{}, false // decided since the last scan
	}
	cs, gen := f.claims[k.vm], f.gen
	f.mu.Unlock()
	live, held, nodes := f.examine(k, cs) // procfs reads without the lock
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok, sure, final := f.pick(k, live, held, nodes)
	if f.gen == gen && final { // else a scan came meanwhile, or a claimant did not answer: decided again next time
		if ok {
			f.found[k], f.unsure[k] = c, !sure
		} else {
			f.refused[k] = true
		}
	}
	return c.VM, ok
}

// due says whether a scan is due at now (the caller holds f.mu).
func (f *Finder) due(now time.Time) bool {
	return !f.scanning && (!f.scanned || now.Sub(f.lastScan) >= f.rescan)
}

// rescanLocked scans procfs again (the caller holds f.mu): the scan reads
// every process's command line, so it runs without the lock, a lookup of
// a known VM (the sampler's, every sample) never waiting for it. With
// wait, the caller waits for it (the lock let go and taken again); else it
// runs in the background, its claims put in when it ends.
func (f *Finder) rescanLocked(now time.Time, wait bool) {
	f.scanning, f.lastScan = true, now
	if !wait {
		f.bg.Add(1)
		go func() {
			defer f.bg.Done()
			if f.scanHook != nil {
				f.scanHook()
			}
			claims := f.scan()
			f.mu.Lock()
			defer f.mu.Unlock()
			f.putClaims(claims)
		}()
		return
	}
	f.mu.Unlock()
	if f.scanHook != nil {
		f.scanHook()
	}
	claims := f.scan()
	f.mu.Lock()
	f.putClaims(claims)
}

// putClaims makes claims, a scan's, the finder's: every lookup is decided
// again from them.
func (f *Finder) putClaims(claims map[string][]claimant) {
	f.claims, f.scanned, f.scanning = claims, true, false
	f.found, f.unsure, f.refused = map[key]claimant{}, map[key]bool{}, map[key]bool{}
	f.gen++
	for sk := range f.said {
		if _, ok := claims[sk.vm]; !ok {
			delete(f.said, sk) // nobody claims it now: told again if it comes back
		}
	}
}

// liveness is what procfs says of a process once found.
type liveness int8

const (
	gone       liveness = iota // it no longer runs, or is another process
	running                    // it runs still: the same process, claiming the same VM
	unanswered                 // a read of its files did not end in time
)

// still says whether process pid, started at start, runs and claims the
// VM of UUID uuid still. Its command line is read before its start time:
// a process that started at start and runs still when its start time is
// read ran when its command line was.
func (f *Finder) still(pid uint32, uuid, start string) liveness {
	c, err := f.readArgs(pid)
	if errors.Is(err, procread.ErrStuck) {
		return unanswered
	}
	if err != nil || c.uuid != uuid {
		return gone
	}
	s, err := f.startTime(pid)
	switch {
	case errors.Is(err, procread.ErrStuck):
		return unanswered
	case err != nil || s != start:
		return gone // a PID taken again by a process that claims the VM too
	}
	return running
}

// scan returns the QEMU processes under proc, by VM UUID (none where
// procfs cannot be read).
func (f *Finder) scan() map[string][]claimant {
	ents, err := os.ReadDir(f.proc)
	if err != nil {
		return map[string][]claimant{}
	}
	found := map[string][]claimant{}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || pid == 0 {
			continue
		}
		c, err := f.readArgs(uint32(pid))
		if err != nil {
			continue // not a QEMU's, gone, or not read in time: passed over this time
		}
		start, err := f.startTime(uint32(pid))
		if err != nil {
			continue
		}
		// copies: a claimant is kept until the next scan, and must not
		// keep the file it was read from
		cl := claimant{VM: VM{PID: uint32(pid), UUID: c.uuid, Name: c.name}, start: strings.Clone(start), mdevs: c.mdevs, uid: f.readUID(uint32(pid))}
		cl.cgroup, cl.scope, err = f.readCgroup(uint32(pid))
		cl.cgroupLate = errors.Is(err, procread.ErrStuck) // read again at each lookup (examine)
		found[c.uuid] = append(found[c.uuid], cl)
	}
	return found
}

// systemMachineScope is the virtual machine's scope that a cgroup path is
// in (kube.MachineScope: systemd-machined's, or Proxmox VE's in the root's
// qemu.slice), where the system's manager made it, in slices alone
// (kube.SlicesAbove) and not a user's: "" for one under a user's slice or
// user manager (user.slice, user@UID.service), any service with a subtree
// delegated to it, or in a container's or another machine's scope, where
// its owner may make machine.slice and any scope in it themselves.
// Of systemd-machined's scopes only a QEMU machine's, as libvirt names it
// ("machine-qemu\x2d1\x2dtrain.scope"), is a VM's, and the process must be
// in it or in one of the subgroups libvirt makes there (qemuSubgroups): a
// container that systemd-nspawn registers has a scope alike
// ("machine-box.scope"), whose payload below it ("payload/...") its root
// runs, a copied QEMU command line included.
func systemMachineScope(path string) string {
	scope := kube.MachineScope(path)
	if scope == "" || !kube.SlicesAbove(scope) || kube.InUserSlice(scope) {
		return ""
	}
	if name := scope[strings.LastIndex(scope, "/")+1:]; strings.HasPrefix(name, "machine-") && !strings.HasPrefix(name, `machine-qemu\x2d`) {
		return ""
	}
	if !qemuSubgroups(strings.TrimPrefix(path, scope)) {
		return ""
	}
	return scope
}

// qemuSubgroups says whether below, the part of a cgroup path below a VM's
// scope ("" or "/..."), is where libvirt puts QEMU's threads: the scope
// itself, its "libvirt" subgroup (cgroup v2), and in either a thread
// group, "emulator", "vcpuN" or "iothreadN".
func qemuSubgroups(below string) bool {
	below = strings.TrimPrefix(below, "/libvirt")
	if below == "" {
		return true
	}
	g, ok := strings.CutPrefix(below, "/")
	if !ok || g == "emulator" {
		return ok
	}
	for _, p := range []string{"vcpu", "iothread"} {
		if n, ok := strings.CutPrefix(g, p); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// errNotQEMU is readArgs's error for a command line that is not a QEMU's
// with a UUID.
var errNotQEMU = errors.New("not a QEMU process with a VM's UUID")

// readArgs parses pid's command line (parse's): errNotQEMU when it is not
// a QEMU process with a UUID, procread.ErrStuck when it was not read in time.
// One over maxCmdline is logged (rate-limited) and passed over.
func (f *Finder) readArgs(pid uint32) (qemuArgs, error) {
	buf, err := f.readProc(pid, "cmdline", maxCmdline)
	if errors.Is(err, fileread.ErrTooLarge) {
		f.noteTooLong(pid)
	}
	if err != nil {
		return qemuArgs{}, err
	}
	c, ok := parse(buf)
	if !ok {
		return qemuArgs{}, errNotQEMU
	}
	return c, nil
}

// ParseCmdline reads a QEMU command line as /proc/PID/cmdline holds it
// (arguments ended by NUL bytes): the VM's UUID (lower case) and name.
// False when the program is not QEMU (no "qemu" in its file name, nor
// "kvm", as Debian's and Proxmox's wrapper is named) or has no well-formed
// UUID.
func ParseCmdline(b []byte) (uuid, name string, ok bool) {
	c, ok := parse(b)
	return c.uuid, c.name, ok
}

// qemuArgs is what a QEMU command line says of its VM.
type qemuArgs struct {
	uuid, name string
	// mdevs are the mediated devices it names by their sysfs path
	// (lower case), as libvirt passes a vGPU ("sysfsdev=/sys/bus/mdev/
	// devices/UUID", in a -device value or its JSON form)
	mdevs []string
}

// mdevPath starts the sysfs path of a mediated device.
const mdevPath = "/sys/bus/mdev/devices/"

// parse reads a QEMU command line (ParseCmdline's). What it returns is
// copied out of b's text, which may be a megabyte long: a claimant kept
// until the next scan keeps no more than it says.
func parse(b []byte) (qemuArgs, bool) {
	var c qemuArgs
	args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	if prog := filepath.Base(args[0]); !strings.Contains(prog, "qemu") && prog != "kvm" {
		return qemuArgs{}, false
	}
	for i := 1; i < len(args); i++ {
		opt := args[i]
		if strings.HasPrefix(opt, "--") {
			opt = opt[1:] // QEMU takes "--opt value" as "-opt value"
		}
		switch {
		case opt == "-uuid" && i+1 < len(args):
			i++
			if validUUID(args[i]) {
				c.uuid = strings.Clone(strings.ToLower(args[i])) // ToLower returns its input when that is lower case
			}
		case opt == "-name" && i+1 < len(args):
			i++
			c.name = strings.Clone(vmName(args[i]))
		default:
			c.mdevs = appendMdevs(c.mdevs, args[i])
		}
	}
	if c.uuid == "" {
		return qemuArgs{}, false
	}
	return c, true
}

// appendMdevs appends to mdevs the mediated devices arg names by their
// sysfs path.
func appendMdevs(mdevs []string, arg string) []string {
	rest := strings.ToLower(arg)
	for {
		i := strings.Index(rest, mdevPath)
		if i < 0 {
			return mdevs
		}
		rest = rest[i+len(mdevPath):]
		if len(rest) >= 36 && validUUID(rest[:36]) {
			mdevs = append(mdevs, strings.Clone(rest[:36])) // rest may be arg
		}
	}
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
	return labelValue(name)
}

// maxVMName bounds a VM's name, as long as a tenant's or a Kubernetes
// object's: it is the vm_name label of the vGPU's info series, and whoever
// names the VM (a user of the host's virtualization, a cloud's API) may
// give a name as long as a command line holds.
const maxVMName = 253

// labelValue is name made fit for a label value: bytes that are not UTF-8
// replaced (a label value that is not would drop the series), cut to
// maxVMName bytes at a character's start.
func labelValue(name string) string {
	name = strings.ToValidUTF8(name, "\uFFFD")
	if len(name) <= maxVMName {
		return name
	}
	i := maxVMName
	for i > 0 && !utf8.RuneStart(name[i]) {
		i--
	}
	return name[:i]
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
