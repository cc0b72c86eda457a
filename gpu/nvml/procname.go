package nvml

import (
	"bytes"
	"errors"
	"io"
	"os"
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
// (under the procfs root, Options.Proc), after the GPUs are read and the
// lock released (Sample), each read a procread.Reader's: waited for at
// most nameTimeout, the processes of a sample read side by side, at most
// maxNameStuck reads at once (the others wait their turn, until their
// deadline). A process whose read runs past that is named "" (as one that
// exited since the list was taken), logged once, and passed over at once
// while the read has not ended; at most maxNameStuck reads are so left
// blocked, past which no file is read. A vGPU's processes, a guest's, keep the name the
// driver gives with their utilization.
//
// NVML read the name anew at each call: a process that sets its title
// (Python's setproctitle, as Ray's workers, gunicorn and celery do;
// PostgreSQL) or execs under its PID is named as it is now. The
// backend keeps each process's name (by its PID and start time, field 22
// of /proc/PID/stat, read each sample to tell a PID taken again) with its
// /proc/PID/comm, also read each sample: that file is the task's own
// copy, read without the process's memory lock, which exec and
// PR_SET_NAME set (Python's setproctitle sets it to the title's first 15
// bytes; PostgreSQL's titles leave it). The command line is
// read again at the first sample where comm has changed, and in any case
// once nameRefresh has passed since it was last read: a title comm does
// not tell is followed within that. Where stat or comm is not read (the
// process stuck, or maxNameStuck reads stuck, which leaves every read
// refused) the name last read of a process known is kept; where a read
// again of the command line is not, the name last read, but after an
// exec, none (as for a process first seen).

// nameTimeout is how long each read of a process's procfs file for its
// name is waited for.
const nameTimeout = time.Second

// nameRefresh is how long a process's name is kept, its comm unchanged,
// before its command line is read again.
const nameRefresh = time.Minute

// maxNameStuck bounds the reads of processes' procfs files for their
// names running at once, and so those left blocked past their deadline.
const maxNameStuck = 16

// maxProcName is the longest name NVML gives: go-nvml's buffer
// (SYSTEM_PROCESS_NAME_BUFFER_SIZE, 256) less its NUL.
const maxProcName = 255

// maxProcComm bounds a read of /proc/PID/comm: a name of at most 15 bytes
// (64 with a kernel's longer names) and a newline.
const maxProcComm = 1 << 10

// maxProcStat bounds a read of /proc/PID/stat: one line of some fifty
// numbers and a command name of at most 15 bytes (64 with a kernel's
// longer names).
const maxProcStat = 1 << 16

// procNames reads and keeps the names of the GPUs' processes.
type procNames struct {
	root   string
	clock  gpu.Clock
	logger log.Logger
	reads  *procread.Reader
	// read reads at most limit bytes from the start of the file at path
	// (readHead; tests block it).
	read func(path string, limit int64) ([]byte, error)
	// link reads the symbolic link at path (os.Readlink; tests fake it)
	link func(path string) (string, error)

	mu    sync.Mutex
	known map[uint32]procName // by PID, of the processes last listed
	said  map[uint32]bool     // the processes logged as not read in time, while listed
	// the processes logged as taken for an MPS server unverified, while listed
	unverified map[uint32]bool
}

// procName is a process's name, as last read.
type procName struct {
	start string    // its start time (field 22 of /proc/PID/stat)
	comm  string    // its /proc/PID/comm, read before the name ("" where not read)
	name  string    // the first word of its command line
	at    time.Time // when the command line was read
}

func newProcNames(root string, clock gpu.Clock, logger log.Logger) *procNames {
	if root == "" {
		root = "/proc"
	}
	return &procNames{
		root: root, clock: clock, logger: logger, read: readHead, link: os.Readlink,
		reads: procread.New(procread.Options{Timeout: nameTimeout, After: clock.After, MaxStuck: maxNameStuck, Join: true}),
		known: map[uint32]procName{}, said: map[uint32]bool{}, unverified: map[uint32]bool{},
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
	for _, said := range []map[uint32]bool{n.said, n.unverified} {
		for pid := range said {
			if !listed[pid] {
				delete(said, pid)
			}
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
// start time is the same, its comm too and nameRefresh has not passed;
// else its command line's first word. Where its stat or comm is not read,
// the one read before, if any; where its command line is not, the one
// read before, where its start time and comm are the same; else "".
func (n *procNames) name(pid uint32) string {
	n.mu.Lock()
	k, known := n.known[pid]
	n.mu.Unlock()
	stat, err := n.readFile(pid, "stat", maxProcStat)
	if err != nil {
		return k.name
	}
	start, ok := procread.StartTime(stat)
	if !ok {
		return k.name
	}
	known = known && k.start == start
	// comm before the command line: an exec between the two reads leaves
	// the old comm kept, and the name is read again at the next sample
	b, err := n.readFile(pid, "comm", maxProcComm)
	if err != nil && known {
		return k.name
	}
	comm := string(bytes.TrimSuffix(b, []byte("\n")))
	now := n.clock.Now()
	if known && k.comm == comm && now.Sub(k.at) < nameRefresh {
		return k.name
	}
	cmdline, err := n.readFile(pid, "cmdline", maxProcName)
	if err != nil {
		if known && k.comm == comm {
			return k.name // read again at the next sample
		}
		n.mu.Lock()
		delete(n.known, pid) // another process, or one that has execed since
		n.mu.Unlock()
		return ""
	}
	name := firstWord(cmdline)
	n.mu.Lock()
	n.known[pid] = procName{start: start, comm: comm, name: name, at: now}
	n.mu.Unlock()
	return name
}

// noMPSServer says whether the processes pids (a GPU's compute list) are
// each named, as last read, and none is named as an MPS server: a process
// not named yet (new since the last sample, or whose name was not read)
// leaves it unknown, false. The name, which a process sets, suffices
// here: a process that takes the server's keeps its GPU in MPS mode (so
// read before) while the MPS clients' list is refused, which only keeps
// the GPU's MPS controls; which process is the server is told by
// markMPSServers.
func (n *procNames) noMPSServer(pids []uint32) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, pid := range pids {
		k, ok := n.known[pid]
		if !ok || filepath.Base(k.name) == gpu.MPSServerName {
			return false
		}
	}
	return true
}

// readFile reads at most limit bytes of process pid's file, or fails with
// procread.ErrStuck, logged once while the process is listed, where the
// read does not end by its deadline or is not started.
func (n *procNames) readFile(pid uint32, file string, limit int64) ([]byte, error) {
	path := filepath.Join(n.root, strconv.FormatUint(uint64(pid), 10), file)
	b, err := n.reads.Read(int(pid), file, func() ([]byte, error) { return n.read(path, limit) })
	if errors.Is(err, procread.ErrStuck) {
		if n.firstSaid(n.said, pid) {
			level.Warn(n.logger).Log("msg", "a GPU process's procfs file not read in time: its name is left empty, or as last read (an executable selector reads /proc/PID/comm where it is empty), and it is not read again before that read ends",
				"pid", pid, "file", path, "timeout", nameTimeout)
		}
	}
	return b, err
}

// firstSaid marks pid in said (one of n's maps of the processes logged
// while listed), and says whether it was not marked before.
func (n *procNames) firstSaid(said map[uint32]bool, pid uint32) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	before := said[pid]
	said[pid] = true
	return !before
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
