package nvml

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// fakeProcfs is the procfs the fixture's backend reads the processes'
// names from: every PID is a process started at tick 1000 whose command
// line is "proc<PID> --flag" and whose comm is "proc<PID>", unless set
// otherwise; a file may be made to block, as the read of a process whose
// memory is held does.
type fakeProcfs struct {
	mu      sync.Mutex
	cmdline map[uint32]string
	comm    map[uint32]string
	start   map[uint32]string
	exe     map[uint32]string        // the exe link's target; none where unset
	ppid    map[uint32]uint32        // the parent; 1 where unset
	blocked map[string]chan struct{} // by path: the reads wait until it is closed
	entered chan string              // told of each blocked read as it blocks
	reads   map[string]int           // by path
}

func newFakeProcfs() *fakeProcfs {
	return &fakeProcfs{cmdline: map[uint32]string{}, comm: map[uint32]string{}, start: map[uint32]string{},
		exe: map[uint32]string{}, ppid: map[uint32]uint32{}, blocked: map[string]chan struct{}{},
		entered: make(chan string, 64), reads: map[string]int{}}
}

// set makes process pid one started at start with the command line
// cmdline.
func (p *fakeProcfs) set(pid uint32, start, cmdline string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start[pid], p.cmdline[pid] = start, cmdline
}

// setComm makes process pid's comm comm (as exec and PR_SET_NAME do).
func (p *fakeProcfs) setComm(pid uint32, comm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.comm[pid] = comm
}

// block makes the reads of process pid's file block until the test ends
// or the function returned is called.
func (p *fakeProcfs) block(t *testing.T, pid uint32, file string) (release func()) {
	path := filepath.Join("/proc", strconv.Itoa(int(pid)), file)
	ch := make(chan struct{})
	p.mu.Lock()
	p.blocked[path] = ch
	p.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.blocked, path)
			p.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

func (p *fakeProcfs) count(pid uint32, file string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads[filepath.Join("/proc", strconv.Itoa(int(pid)), file)]
}

// read is procNames.read over the fake procfs at /proc.
func (p *fakeProcfs) read(path string, limit int64) ([]byte, error) {
	rel, ok := strings.CutPrefix(path, "/proc/")
	dir, file, ok2 := strings.Cut(rel, "/")
	n, err := strconv.ParseUint(dir, 10, 32)
	if !ok || !ok2 || err != nil {
		return nil, os.ErrNotExist
	}
	pid := uint32(n)
	p.mu.Lock()
	p.reads[path]++
	ch := p.blocked[path]
	start, ok := p.start[pid]
	if !ok {
		start = "1000"
	}
	cmdline, ok := p.cmdline[pid]
	if !ok {
		cmdline = fmt.Sprintf("proc%d\x00--flag\x00", pid)
	}
	comm, ok := p.comm[pid]
	if !ok {
		comm = fmt.Sprintf("proc%d", pid)
	}
	ppid, ok := p.ppid[pid]
	if !ok {
		ppid = 1
	}
	p.mu.Unlock()
	if ch != nil {
		p.entered <- path
		<-ch
	}
	var b []byte
	switch file {
	case "stat":
		b = []byte(fmt.Sprintf("%d (proc %d) S %d 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %s 0 0\n", pid, pid, ppid, start))
	case "cmdline":
		b = []byte(cmdline)
	case "comm":
		b = []byte(comm + "\n")
	default:
		return nil, os.ErrNotExist
	}
	return b[:min(int64(len(b)), limit)], nil
}

// setExe makes process pid's executable exe (its exe link's target; ""
// a link not read) and its parent ppid.
func (p *fakeProcfs) setExe(pid uint32, exe string, ppid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exe[pid], p.ppid[pid] = exe, ppid
	if exe == "" {
		delete(p.exe, pid)
	}
}

// link is procNames.link over the fake procfs at /proc: the exe links.
func (p *fakeProcfs) link(path string) (string, error) {
	rel, ok := strings.CutPrefix(path, "/proc/")
	dir, ok2 := strings.CutSuffix(rel, "/exe")
	n, err := strconv.ParseUint(dir, 10, 32)
	if !ok || !ok2 || err != nil {
		return "", os.ErrNotExist
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads[path]++
	exe, ok := p.exe[uint32(n)]
	if !ok {
		return "", os.ErrNotExist
	}
	return exe, nil
}

func oneProc(pid uint32) []nvml.ProcessInfo {
	return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}
}

// listedName returns the name of process pid on GPU dev in rd, and whether
// it is listed there.
func listedName(rd *gpu.Readings, dev int, pid uint32) (string, bool) {
	for _, p := range rd.Devices[dev].Processes {
		if p.PID == pid {
			return p.Name, true
		}
	}
	return "", false
}

// A process's name is read once for its PID and start time while its comm
// is unchanged, within nameRefresh: a sample after the first reads only
// its start time and comm; a PID taken again by another process is read
// again.
func TestProcessNameReadOnce(t *testing.T) {
	f := newFixture(t, dgxh100.New())
	f.setProcs(3, oneProc(4242), nil)
	b := f.backend()
	for i := range 3 {
		if name, _ := listedName(sample(t, b), 3, 4242); name != "proc4242" {
			t.Errorf("sample %d: name %q, want proc4242", i, name)
		}
		f.clock.Advance(time.Second)
	}
	if n := f.procfs.count(4242, "cmdline"); n != 1 {
		t.Errorf("command line read %d times in 3 samples, want once", n)
	}
	if n := f.procfs.count(4242, "stat"); n != 3 {
		t.Errorf("stat read %d times in 3 samples, want 3 (a PID taken again is told by its start time)", n)
	}
	if n := f.procfs.count(4242, "comm"); n != 3 {
		t.Errorf("comm read %d times in 3 samples, want 3 (an exec is told by its comm)", n)
	}
	f.procfs.set(4242, "2000", "/opt/conda/bin/python\x00serve.py\x00")
	if name, _ := listedName(sample(t, b), 3, 4242); name != "/opt/conda/bin/python" {
		t.Errorf("PID taken by another process: name %q, want /opt/conda/bin/python", name)
	}
	if n := f.procfs.count(4242, "cmdline"); n != 2 {
		t.Errorf("command line read %d times once the PID was taken again, want 2", n)
	}
}

// A process whose command line cannot be read (its memory held: a process
// stuck in the driver's teardown) holds the sample no longer than the
// read's deadline, nor any other GPU's readings or process's name, nor a
// control call meanwhile; it is named "", logged once, and passed over at
// once in the samples while the read has not ended; then read again.
// NVML's name call, which reads the same file, is never made.
func TestStuckProcessNameBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, dgxh100.New())
		f.setProcs(0, oneProc(7), nil)
		f.setProcs(3, oneProc(4242), nil)
		b := f.backend()
		release := f.procfs.block(t, 4242, "cmdline")
		nvmlName := make(chan struct{})
		t.Cleanup(func() { close(nvmlName) })
		f.srv.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) {
			if pid == 4242 {
				<-nvmlName // as stuck
			}
			return fmt.Sprintf("proc%d", pid), nvml.SUCCESS
		}
		done := sampleAsync(t, b)
		synctest.Wait() // the sample waits on the stuck read
		ctl := make(chan error, 1)
		go func() { ctl <- b.SetPowerLimit(context.Background(), f.devs[0].UUID, 500) }()
		synctest.Wait()
		select {
		case err := <-ctl:
			if err != nil {
				t.Errorf("SetPowerLimit while a process's name is read: %v", err)
			}
		default:
			t.Error("SetPowerLimit waits for a process's name")
		}
		f.clock.Advance(nameTimeout)
		synctest.Wait()
		var rd *gpu.Readings
		select {
		case rd = <-done:
		default:
			t.Fatal("Sample still blocked past the name read's deadline")
		}
		for i, d := range rd.Devices {
			if !d.Up {
				t.Errorf("GPU %d down: %s", i, d.Err)
			}
		}
		if name, ok := listedName(rd, 3, 4242); !ok || name != "" {
			t.Errorf("stuck process: listed %v, name %q; want listed, no name", ok, name)
		}
		if name, _ := listedName(rd, 0, 7); name != "proc7" {
			t.Errorf("another process: name %q, want proc7", name)
		}

		// the next sample passes it over at once: no deadline waited for
		f.clock.Advance(time.Second)
		done = sampleAsync(t, b)
		synctest.Wait()
		select {
		case rd = <-done:
		default:
			t.Fatal("the next sample waits for the process whose read is stuck")
		}
		if name, _ := listedName(rd, 3, 4242); name != "" {
			t.Errorf("stuck process, next sample: name %q, want none", name)
		}
		if n := f.procfs.count(4242, "cmdline"); n != 1 {
			t.Errorf("stuck command line read %d times, want once while it has not ended", n)
		}
		if n := f.logs.count("not read in time", "pid=4242"); n != 1 {
			t.Errorf("stuck process logged %d times, want once:\n%s", n, f.logs.String())
		}

		release()
		synctest.Wait()
		f.clock.Advance(time.Second)
		if name, _ := listedName(sample(t, b), 3, 4242); name != "proc4242" {
			t.Errorf("once the read ended: name %q, want proc4242", name)
		}
	})
}

// A sample names its processes side by side: with 40 of them whose
// command lines block, each read started before any was counted stuck,
// and 40 were left blocked where maxNameStuck said 16. At most that many
// run at once; the others are passed over at their deadline, named "".
func TestManyStuckProcessNamesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const procs = 40
		f := newFixture(t, dgxh100.New())
		var ps []nvml.ProcessInfo
		for pid := uint32(5000); pid < 5000+procs; pid++ {
			ps = append(ps, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1, GpuInstanceId: noInstance, ComputeInstanceId: noInstance})
			defer f.procfs.block(t, pid, "cmdline")()
		}
		f.setProcs(3, ps, nil)
		b := f.backend()
		done := sampleAsync(t, b)
		synctest.Wait()
		// a process passed over at one file may ask the next (comm, then
		// its command line) before the stuck reads are counted: it waits
		// one deadline more, at most one per file
		var rd *gpu.Readings
		for i := 0; rd == nil; i++ {
			if i == 3 {
				t.Fatal("the sample still waits past three deadlines")
			}
			f.clock.Advance(nameTimeout)
			synctest.Wait()
			select {
			case rd = <-done:
			default:
			}
		}
		reads := 0
		for _, p := range ps {
			reads += f.procfs.count(p.Pid, "cmdline")
			if name, ok := listedName(rd, 3, p.Pid); !ok || name != "" {
				t.Errorf("PID %d: listed %v, name %q; want listed, no name", p.Pid, ok, name)
			}
		}
		if reads != maxNameStuck {
			t.Errorf("%d command line reads started and left blocked, want %d", reads, maxNameStuck)
		}
	})
}

// The name is the first word of the command line as the process wrote it,
// as NVML gives it: at most 255 bytes; the whole line where it has no NUL.
func TestFirstWord(t *testing.T) {
	long := strings.Repeat("a", 300)
	for _, tc := range []struct{ cmdline, want string }{
		{"python3\x00train.py\x00--lr\x000.1\x00", "python3"},
		{"/opt/conda/bin/python\x00-m\x00vllm\x00", "/opt/conda/bin/python"},
		{"ray::Worker.run some args", "ray::Worker.run some args"}, // a title over the arguments
		{"", ""}, // an exiting process, or a kernel thread
		{"\x00x\x00", ""},
		{long + "\x00", long[:255]},
	} {
		if got := firstWord([]byte(tc.cmdline)); got != tc.want {
			t.Errorf("firstWord(%q) = %q, want %q", tc.cmdline, got, tc.want)
		}
	}
}

// Names are read from the files under the procfs root the backend is
// given (--proc.root), and from the real /proc by default.
func TestProcessNameUnderRoot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "123")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string]string{
		"stat":    "123 (vllm) S 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0\n",
		"cmdline": "/usr/bin/vllm\x00serve\x00",
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	self := os.Args[0]
	if len(self) > maxProcName {
		self = self[:maxProcName]
	}
	for _, tc := range []struct {
		root string
		pid  uint32
		want string
	}{
		{root, 123, "/usr/bin/vllm"},
		{root, 124, ""},                 // no such process
		{root + "-absent", 123, ""},     // a root that is not there
		{"", uint32(os.Getpid()), self}, // /proc by default
		{"/proc", uint32(os.Getpid()), self},
		{"/proc", 1 << 31, ""}, // past any PID
	} {
		n := newProcNames(tc.root, gpu.RealClock{}, log.NewNopLogger())
		if got := n.name(tc.pid); got != tc.want {
			t.Errorf("root %q, PID %d: name %q, want %q", tc.root, tc.pid, got, tc.want)
		}
	}
}

// A process's name follows the process, as NVML's did, each read again
// through the same bounded reads: an exec, or a title set with
// PR_SET_NAME too (Python's setproctitle: Ray's workers, gunicorn,
// celery), changes its comm, and its name is read again at the next
// sample; a title that leaves comm (PostgreSQL's, nginx's) is read within
// nameRefresh. Neither reads the command line at each sample.
func TestProcessNameFollowed(t *testing.T) {
	const step = 10 * time.Second // between samples
	for _, tc := range []struct {
		name                   string
		comm, cmdline          string // as first read
		comm2, cmdline2, want2 string // once changed
		within                 time.Duration
	}{
		{"exec", "python3", "/usr/bin/python3\x00launch.py\x00",
			"server", "/opt/app/server\x00--port\x008000\x00", "/opt/app/server", step},
		{"setproctitle", "ray::IDLE", "ray::IDLE\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
			"ray::Trainer.tr", "ray::Trainer.train\x00", "ray::Trainer.train", step},
		{"title comm does not tell", "postgres", "postgres: idle\x00\x00\x00\x00\x00\x00",
			"postgres", "postgres: SELECT\x00\x00\x00\x00", "postgres: SELECT", nameRefresh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dgxh100.New())
			f.setProcs(3, oneProc(4242), nil)
			f.procfs.set(4242, "1000", tc.cmdline)
			f.procfs.setComm(4242, tc.comm)
			b := f.backend()
			want := firstWord([]byte(tc.cmdline))
			for range 3 {
				if name, _ := listedName(sample(t, b), 3, 4242); name != want {
					t.Fatalf("before the change: name %q, want %q", name, want)
				}
				f.clock.Advance(step)
			}
			f.procfs.set(4242, "1000", tc.cmdline2)
			f.procfs.setComm(4242, tc.comm2)
			var since time.Duration // since the change
			for ; since <= tc.within; since += step {
				f.clock.Advance(step)
				if name, _ := listedName(sample(t, b), 3, 4242); name == tc.want2 {
					break
				}
			}
			if since > tc.within {
				t.Fatalf("name not %q within %v of the change", tc.want2, tc.within)
			}
			for range 30 { // five minutes
				f.clock.Advance(step)
				if name, _ := listedName(sample(t, b), 3, 4242); name != tc.want2 {
					t.Fatalf("%v after the change: name %q, want %q", since, name, tc.want2)
				}
				since += step
			}
			// once first, once at the change, once each nameRefresh
			run := 3*step + since
			if n, most := f.procfs.count(4242, "cmdline"), 2+int(run/nameRefresh); n > most {
				t.Errorf("command line read %d times in %v, want at most %d", n, run, most)
			}
		})
	}
}

// sampleAsync samples b in a goroutine of its own, whose readings the
// channel receives.
func sampleAsync(t *testing.T, b *Backend) <-chan *gpu.Readings {
	done := make(chan *gpu.Readings, 1)
	go func() {
		rd, err := b.Sample(context.Background())
		if err != nil {
			t.Errorf("Sample: %v", err)
		}
		done <- rd
	}()
	return done
}

// sampleByDeadline samples b, within a synctest bubble, past the reads'
// deadline.
func sampleByDeadline(t *testing.T, f *fixture, b *Backend) *gpu.Readings {
	t.Helper()
	done := sampleAsync(t, b)
	synctest.Wait()
	f.clock.Advance(nameTimeout)
	synctest.Wait()
	select {
	case rd := <-done:
		return rd
	default:
		t.Fatal("Sample blocked past the reads' deadline")
		return nil
	}
}

// namedProc7 returns a backend whose GPU 0 runs process 7, named proc7 by
// a first sample.
func namedProc7(t *testing.T) (*fixture, *Backend) {
	t.Helper()
	f := newFixture(t, dgxh100.New())
	f.setProcs(0, oneProc(7), nil)
	b := f.backend()
	if name, _ := listedName(sample(t, b), 0, 7); name != "proc7" {
		t.Fatalf("name %q, want proc7", name)
	}
	return f, b
}

// Once maxNameStuck reads are stuck, no procfs file is read, a process's
// stat neither: a process named before keeps its name, as it does past
// nameRefresh; one never named has none. Once the reads end, all are
// named.
func TestProcessNameKeptWhileReadsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, b := namedProc7(t)
		var stuck []nvml.ProcessInfo
		var release []func()
		for pid := uint32(100); pid < 100+maxNameStuck; pid++ {
			stuck = append(stuck, oneProc(pid)...)
			release = append(release, f.procfs.block(t, pid, "cmdline"))
		}
		f.setProcs(3, stuck, nil)
		f.clock.Advance(time.Second)
		sampleByDeadline(t, f, b)
		stats := f.procfs.count(7, "stat")
		for _, wait := range []time.Duration{time.Second, 2 * nameRefresh} {
			f.clock.Advance(wait)
			rd := sample(t, b)
			if name, _ := listedName(rd, 0, 7); name != "proc7" {
				t.Errorf("%d reads stuck, %v on: name %q, want proc7 as read before", maxNameStuck, wait, name)
			}
			if name, _ := listedName(rd, 3, 100); name != "" {
				t.Errorf("a process never read: name %q, want none", name)
			}
		}
		if n := f.procfs.count(7, "stat"); n != stats {
			t.Errorf("stat read %d times while reads are refused, want none", n-stats)
		}
		for _, r := range release {
			r()
		}
		synctest.Wait()
		f.clock.Advance(time.Second)
		rd := sample(t, b)
		if name, _ := listedName(rd, 0, 7); name != "proc7" {
			t.Errorf("once the reads ended: name %q, want proc7", name)
		}
		for _, pid := range []uint32{100, 100 + maxNameStuck - 1} {
			if name, _ := listedName(rd, 3, pid); name != fmt.Sprintf("proc%d", pid) {
				t.Errorf("once the reads ended: process %d named %q", pid, name)
			}
		}
	})
}

// A process whose command line, read again, is stuck keeps the name last
// read, and is passed over at once while that read has not ended; one
// that has execed since (another comm) is named "", as one first seen.
func TestProcessNameReadAgainStuck(t *testing.T) {
	for _, tc := range []struct {
		name string
		comm string // its comm once the name is to be read again
		want string
	}{
		{"retitled", "proc7", "proc7"},
		{"execed", "server", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, b := namedProc7(t)
				f.procfs.setComm(7, tc.comm)
				release := f.procfs.block(t, 7, "cmdline")
				f.clock.Advance(nameRefresh)
				if name, _ := listedName(sampleByDeadline(t, f, b), 0, 7); name != tc.want {
					t.Errorf("read again, stuck: name %q, want %q", name, tc.want)
				}
				f.clock.Advance(time.Second)
				if name, _ := listedName(sample(t, b), 0, 7); name != tc.want {
					t.Errorf("next sample: name %q, want %q", name, tc.want)
				}
				if n := f.procfs.count(7, "cmdline"); n != 2 {
					t.Errorf("command line read %d times, want 2 (not again while stuck)", n)
				}
				f.procfs.set(7, "1000", "/opt/app/server\x00")
				release()
				synctest.Wait()
				f.clock.Advance(time.Second)
				if name, _ := listedName(sample(t, b), 0, 7); name != "/opt/app/server" {
					t.Errorf("once the read ended: name %q, want /opt/app/server", name)
				}
			})
		})
	}
}
