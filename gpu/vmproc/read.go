package vmproc

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/procread"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// DefaultReadTimeout is how long, by default, a read of a process's file
// under procfs is waited for.
const DefaultReadTimeout = time.Second

// maxStat bounds a read of /proc/PID/stat: one line of some fifty numbers
// and a command name of at most 15 bytes.
const maxStat = 1 << 16

// A read of /proc/PID/cmdline reads the process's memory under its mmap
// lock: for a process in uninterruptible sleep (a QEMU whose memory a
// stuck device or file system holds, its mmap lock contended) the read
// blocks, and cannot be interrupted; so may a read of its other files
// (status, cgroup, the links in fd). So each read of a process's file is a
// procread.Reader's: waited for at most readTimeout (on the finder's
// clock); past that the process counts as not (yet) confirmed, and the
// read is left to end when it does, its result dropped. A lookup that
// reads the same file meanwhile waits for that one read (the reads join),
// and no read of a process is started while an earlier read of its has
// run past its deadline: the goroutines left blocked are at most one per
// file read of each process that is stuck (its command line, stat,
// status, cgroup and fd), however often it is asked for. Every read of a
// process's file goes through readProc or, for fd, holding (pick.go): the
// only procfs read that does not is the listing of procfs itself, a scan's,
// which reads no process's files.

// readProc reads the file name of process pid (at most limit bytes), or
// fails with procread.ErrStuck where the read does not end by its deadline or
// an earlier read of the process's has not ended past its own.
func (f *Finder) readProc(pid uint32, name string, limit int64) ([]byte, error) {
	return f.bounded(pid, name, func(path string) ([]byte, error) { return f.readFile(path, limit) })
}

// bounded runs read on the path of process pid's file name as readProc
// reads a file (f.reads's: joined, waited for at most readTimeout);
// procread.ErrStuck, logged, where it does not end by then or an earlier read
// of the process's has not ended past its own deadline.
func (f *Finder) bounded(pid uint32, name string, read func(path string) ([]byte, error)) ([]byte, error) {
	path := filepath.Join(f.proc, strconv.FormatUint(uint64(pid), 10), name)
	b, err := f.reads.Read(int(pid), name, func() ([]byte, error) { return read(path) })
	if errors.Is(err, procread.ErrStuck) {
		f.noteUnanswered(pid, name)
	}
	return b, err
}

// startTime returns the start time of process pid (procread.StartTime's, field
// 22 of /proc/PID/stat): with the PID, it names one process, which a PID
// taken again does not share.
func (f *Finder) startTime(pid uint32) (string, error) {
	b, err := f.readProc(pid, "stat", maxStat)
	if err != nil {
		return "", err
	}
	s, ok := procread.StartTime(b)
	if !ok {
		return "", errors.New("no start time")
	}
	return s, nil
}

// readUID returns the real UID of process pid (its /proc/PID/status's,
// kube.StatusUID's); -1 where it is not known, or not read in time.
func (f *Finder) readUID(pid uint32) int {
	b, err := f.readProc(pid, "status", kube.MaxProcBytes)
	if err != nil {
		return -1
	}
	return kube.StatusUID(b)
}

// readCgroup returns the cgroup path of process pid (kube.ParseProcCgroup's)
// and the virtual machine's scope it is in (systemMachineScope's), copies
// that keep no part of the file; procread.ErrStuck where it was not read in
// time. A file whose hierarchies are not those of the exporter's own (a
// unified line where no cgroup2 is mounted, a hierarchy the host lacks) is
// refused (cgroupfile.Host): a cgroup name with a line break in it forged
// the line.
func (f *Finder) readCgroup(pid uint32) (path, scope string, err error) {
	b, err := f.readProc(pid, "cgroup", kube.MaxProcBytes)
	if err != nil {
		return "", "", err
	}
	cg, err := kube.ReadProcCgroup(b, f.host)
	if err != nil {
		return "", "", err
	}
	return strings.Clone(cg.Path), strings.Clone(systemMachineScope(cg.Path)), nil
}

// logEvery is how often, at most, a process's procfs files are said in
// the log to be unread (past their deadline, or too long).
const logEvery = 10 * time.Minute

// noteUnanswered logs, at most once per logEvery for each process, that a
// read of its file name did not end in time.
func (f *Finder) noteUnanswered(pid uint32, name string) {
	if held, ok := f.lines.NoteAt("unanswered "+strconv.FormatUint(uint64(pid), 10), f.clock.Now()); ok {
		level.Warn(f.logger).Log("msg", "a process's procfs file not read in time: the process is not taken for a VM's until it is, and is not read again before that read ends",
			"pid", pid, "file", name, "timeout", f.readTimeout, "held_back", held)
	}
}

// noteTooLong logs, at most once per logEvery for each process, that its
// command line is over maxCmdline and was passed over.
func (f *Finder) noteTooLong(pid uint32) {
	if held, ok := f.lines.NoteAt("long "+strconv.FormatUint(uint64(pid), 10), f.clock.Now()); ok {
		level.Warn(f.logger).Log("msg", "a process's command line over 1 MiB passed over: not taken for a VM's QEMU", "pid", pid, "held_back", held)
	}
}
