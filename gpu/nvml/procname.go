package nvml

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
)

// A process's name, as NVML gives it (nvmlSystemGetProcessName), is the
// first word of its command line as the process wrote it, argv[0]
// ("python3", "/opt/conda/bin/python"), cut to the 255 bytes of go-nvml's
// buffer: the library reads /proc/PID/cmdline. That read reads the
// process's memory under its mmap lock, which a process stuck in the
// driver's teardown, or whose arguments lie on a page of a file system that
// never answers, holds: the read blocks, and cannot be interrupted. Asked
// of NVML for every process in every sample, under the backend's lock, it
// held every GPU's sample and every control call for good in the very
// incident where a process is stuck.
//
// So the backend reads the name itself, the same word of the same file
// (under the procfs root, Options.Proc), once per process (its PID and
// start time, field 22 of /proc/PID/stat, the file read each sample to
// tell a PID taken again), after the GPUs are read and the lock released
// (Sample), each read a procread.Reader's: waited for at most
// nameTimeout, the processes of a sample read side by side. A process
// whose read runs past that is named "" (as one that exited since the
// list was taken), logged once, and passed over at once while the read
// has not ended; at most maxNameStuck reads are left blocked, past which
// no name is read. A vGPU's processes, a guest's, keep the name the
// driver gives with their utilization.

// nameTimeout is how long each read of a process's procfs file for its
// name is waited for.
const nameTimeout = time.Second

// maxNameStuck bounds the reads of processes' procfs files for their
// names left blocked past their deadline.
const maxNameStuck = 16

// maxProcName is the longest name NVML gives: go-nvml's buffer
// (SYSTEM_PROCESS_NAME_BUFFER_SIZE, 256) less its NUL.
const maxProcName = 255

// maxProcStat bounds a read of /proc/PID/stat: one line of some fifty
// numbers and a command name of at most 15 bytes (64 with a kernel's
// longer names).
const maxProcStat = 1 << 16

// procNames reads and keeps the names of the GPUs' processes.
type procNames struct {
	root   string
	logger log.Logger
	reads  *procread.Reader
	// read reads at most limit bytes from the start of the file at path
	// (readHead; tests block it).
	read func(path string, limit int64) ([]byte, error)

	mu    sync.Mutex
	known map[uint32]procName // by PID, of the processes last listed
	said  map[uint32]bool     // the processes logged as not read in time, while listed
}

// procName is a process's name, read once in its life.
type procName struct {
	start string // its start time (field 22 of /proc/PID/stat)
	name  string
}

func newProcNames(root string, clock gpu.Clock, logger log.Logger) *procNames {
	if root == "" {
		root = "/proc"
	}
	return &procNames{
		root: root, logger: logger, read: readHead,
		reads: procread.New(procread.Options{Timeout: nameTimeout, After: clock.After, MaxStuck: maxNameStuck, Join: true}),
		known: map[uint32]procName{}, said: map[uint32]bool{},
	}
}

// readHead reads at most limit bytes from the start of the regular file
// at path (fileread's checks: not a FIFO or device of a root pointed
// elsewhere).
func readHead(path string, limit int64) ([]byte, error) {
	f, err := fileread.Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// fill names the processes of the readings, but a vGPU's.
func (n *procNames) fill(rd *gpu.Readings) {
	listed := map[uint32]bool{}
	for _, d := range rd.Devices {
		for _, p := range d.Processes {
			if p.VGPUInstance == 0 {
				listed[p.PID] = true
			}
		}
	}
	names := make(map[uint32]string, len(listed))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for pid := range listed {
		wg.Go(func() {
			name := n.name(pid)
			mu.Lock()
			names[pid] = name
			mu.Unlock()
		})
	}
	wg.Wait()
	n.mu.Lock()
	for pid := range n.known {
		if !listed[pid] {
			delete(n.known, pid)
		}
	}
	for pid := range n.said {
		if !listed[pid] {
			delete(n.said, pid)
		}
	}
	n.mu.Unlock()
	for i := range rd.Devices {
		ps := rd.Devices[i].Processes
		for j := range ps {
			if ps[j].VGPUInstance == 0 {
				ps[j].Name = names[ps[j].PID]
			}
		}
	}
}

// name returns the name of process pid: the one read before, where its
// start time is the same; else its command line's first word; "" where
// either file is not read (the process exited, or its read is stuck).
func (n *procNames) name(pid uint32) string {
	stat, err := n.readFile(pid, "stat", maxProcStat)
	if err != nil {
		return ""
	}
	start, ok := procread.StartTime(stat)
	if !ok {
		return ""
	}
	n.mu.Lock()
	k, ok := n.known[pid]
	n.mu.Unlock()
	if ok && k.start == start {
		return k.name
	}
	cmdline, err := n.readFile(pid, "cmdline", maxProcName)
	if err != nil {
		return ""
	}
	name := firstWord(cmdline)
	n.mu.Lock()
	n.known[pid] = procName{start: start, name: name}
	n.mu.Unlock()
	return name
}

// readFile reads at most limit bytes of process pid's file, or fails with
// procread.ErrStuck, logged once while the process is listed, where the
// read does not end by its deadline or is not started.
func (n *procNames) readFile(pid uint32, file string, limit int64) ([]byte, error) {
	path := filepath.Join(n.root, strconv.FormatUint(uint64(pid), 10), file)
	b, err := n.reads.Read(int(pid), file, func() ([]byte, error) { return n.read(path, limit) })
	if errors.Is(err, procread.ErrStuck) {
		n.mu.Lock()
		said := n.said[pid]
		n.said[pid] = true
		n.mu.Unlock()
		if !said {
			level.Warn(n.logger).Log("msg", "a GPU process's procfs file not read in time: its name is left empty (an executable selector reads /proc/PID/comm instead), and it is not read again before that read ends",
				"pid", pid, "file", path, "timeout", nameTimeout)
		}
	}
	return b, err
}

// firstWord is the first NUL-terminated word of a command line, as NVML
// names a process: argv[0], or the whole line where the process rewrote
// it without NULs (a title set over its arguments).
func firstWord(cmdline []byte) string {
	if i := bytes.IndexByte(cmdline, 0); i >= 0 {
		cmdline = cmdline[:i]
	}
	if len(cmdline) > maxProcName {
		cmdline = cmdline[:maxProcName]
	}
	return string(cmdline)
}
