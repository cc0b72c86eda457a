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
// line is "proc<PID> --flag", unless set otherwise; a file may be made to
// block, as the read of a process whose memory is held does.
type fakeProcfs struct {
	mu      sync.Mutex
	cmdline map[uint32]string
	start   map[uint32]string
	blocked map[string]chan struct{} // by path: the reads wait until it is closed
	entered chan string              // told of each blocked read as it blocks
	reads   map[string]int           // by path
}

func newFakeProcfs() *fakeProcfs {
	return &fakeProcfs{cmdline: map[uint32]string{}, start: map[uint32]string{}, blocked: map[string]chan struct{}{},
		entered: make(chan string, 64), reads: map[string]int{}}
}

// set makes process pid one started at start with the command line
// cmdline.
func (p *fakeProcfs) set(pid uint32, start, cmdline string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start[pid], p.cmdline[pid] = start, cmdline
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
	p.mu.Unlock()
	if ch != nil {
		p.entered <- path
		<-ch
	}
	var b []byte
	switch file {
	case "stat":
		b = []byte(fmt.Sprintf("%d (proc %d) S 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %s 0 0\n", pid, pid, start))
	case "cmdline":
		b = []byte(cmdline)
	default:
		return nil, os.ErrNotExist
	}
	return b[:min(int64(len(b)), limit)], nil
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

// A process's name is read once in its life (its PID and start time): a
// sample after the first reads only its start time; a PID taken again by
// another process is read again.
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
		sampleAsync := func() <-chan *gpu.Readings {
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
		done := sampleAsync()
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
		done = sampleAsync()
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
