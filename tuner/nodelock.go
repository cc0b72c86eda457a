package tuner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// DefaultNodeLock is the node lock every install shares, whatever its
// journal's directory: the Helm chart mounts /run/vgpu-exporter from the
// node, the systemd unit's tuner-enforce.conf makes it its runtime
// directory (kept at stop). /run is cleared at boot, as a lock should be.
const DefaultNodeLock = "/run/vgpu-exporter/tuner.lock"

// nodeLockHeader is the first line of a node lock file: a file that is
// not empty and does not begin with it is not one, and is never written.
const nodeLockHeader = "vgpu_exporter tuner node lock\n"

// nodeLockMax is the most of a lock file read (the holder's note).
const nodeLockMax = 4096

// NodeLock is the node-wide lock of the tuner that acts on a node's GPUs
// (docs/journal.md, "One tuner per node"): an exclusive flock on a file
// every install names alike, released by the kernel when the process
// dies, however it dies. Keep it reachable until the process exits (the
// *os.File's finalizer would close it, releasing the lock).
type NodeLock struct {
	f    *os.File
	path string
}

// NodeLockHolder is what the holder writes in the lock file, for the
// error of the tuner it keeps out: PID alone is meaningless outside the
// holder's PID namespace (a pod's), so its namespace, host name (a pod's
// name), cgroup (a systemd unit's or a pod's, where not namespaced) and
// journal go with it.
type NodeLockHolder struct {
	Journal string
	Mode    string
	Started time.Time
}

// note is the holder's line written in the lock file.
func (h NodeLockHolder) note() string {
	host, _ := os.Hostname()
	pidns, _ := os.Readlink("/proc/self/ns/pid")
	cg := `""`
	if b, err := readBounded("/proc/self/cgroup", 64<<10); err == nil {
		cg = unifiedCgroup(b, nil) // its own: the hierarchies the kernel lists
	}
	return fmt.Sprintf("pid=%d pid_namespace=%s host=%s cgroup=%s started=%s mode=%s journal=%s\n",
		os.Getpid(), strconv.Quote(pidns), strconv.Quote(host), cg,
		h.Started.UTC().Format(time.RFC3339), strconv.Quote(h.Mode), strconv.Quote(cmpJournal(h.Journal)))
}

func cmpJournal(j string) string {
	if j == "" {
		return "none"
	}
	return j
}

// AcquireNodeLock takes the node lock at path without waiting, creating
// the file when missing, and writes holder's note in it. Of directories
// it creates the default lock's alone, as systemd's RuntimeDirectory
// would (DefaultNodeLock's). Refused: a lock another process holds (the
// error quotes its note), a file that is not a regular one or not a node
// lock (it is never written), a file system without locks (a lock there
// would exclude nothing), a path that cannot be created, and another
// path whose directory is not there: a mistyped path would be a lock of
// its own, which keeps no other tuner out.
func AcquireNodeLock(path string, holder NodeLockHolder) (*NodeLock, error) {
	return acquireNodeLock(path, filepath.Dir(DefaultNodeLock), holder)
}

// acquireNodeLock is AcquireNodeLock, made is the one directory it
// creates when missing.
func acquireNodeLock(path, made string, holder NodeLockHolder) (*NodeLock, error) {
	if err := nodeLockDir(path, made); err != nil {
		return nil, err
	}
	if m, ok := irregular(path, os.Lstat); ok {
		if m&fs.ModeSymlink != 0 {
			return nil, symlinkRefused(path)
		}
		return nil, fmt.Errorf("%w, not opened: give the node lock a file of its own", notRegular(path, m))
	}
	// Not through a symbolic link (one planted there would have this
	// process create or write the file it names), and the owner's alone:
	// a file others may open, they may flock, and keep every tuner out.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, symlinkRefused(path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w%s", path, err, notWritable(err))
	}
	l, err := lockNode(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := l.write(holder.note()); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// symlinkRefused is the refusal of a node lock path that is a symbolic
// link.
func symlinkRefused(path string) error {
	return fmt.Errorf("%s is a symbolic link, not followed: give the node lock a file of its own", path)
}

// lockNode locks f, opened from path, after checking it is a regular
// file, and checks that what it holds is a node lock's.
func lockNode(f *os.File, path string) (*NodeLock, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: give the node lock a file of its own", notRegular(path, fi.Mode().Type()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s is owned by uid %d, not by this process's (uid %d), and that user could hold it and keep every tuner out: remove it, or give the node lock a file of its own", path, st.Uid, os.Geteuid())
	}
	err = flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return nil, fmt.Errorf("%s is held by the tuner of another exporter acting on this node's GPUs (%s%s): one tuner acts per node; stop that one, or run this one with --tuner.mode=recommend or off", path, holderOf(f), kernelHolder(f))
	case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP):
		return nil, fmt.Errorf("%s is on a file system without locks (%v), where it would keep no other tuner out: give a path on a local file system (/run)", path, err)
	case err != nil:
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	b, err := readNodeLock(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > 0 && !bytes.HasPrefix(b, []byte(nodeLockHeader)) {
		return nil, fmt.Errorf("%s holds something other than a node lock (%d bytes not written by a tuner), left as it is: give the node lock a file of its own", path, len(b))
	}
	if fi.Mode().Perm()&0o077 != 0 {
		// a node lock others may open (another umask made it): its
		// owner's alone now
		if err := f.Chmod(0o600); err != nil {
			return nil, fmt.Errorf("%s: making it its owner's alone: %w", path, err)
		}
	}
	return &NodeLock{f: f, path: path}, nil
}

// mkdirAll creates the lock's directory (tests replace it).
var mkdirAll = os.MkdirAll

// nodeLockDir makes sure the directory of the node lock at path is
// there: made (mode 0755) where it is the directory made, else refused
// when missing.
func nodeLockDir(path, made string) error {
	dir := filepath.Dir(path)
	if filepath.Clean(dir) == filepath.Clean(made) {
		if err := mkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the directory of %s: %w%s", path, err, notWritable(err))
		}
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory of %s, %s, is not there: of the lock's directories only the default's, %s, is made (a mistyped path would be a lock of its own, which keeps no other tuner out); create it, or give the path every install on the node names", path, dir, made)
	case err != nil:
		return fmt.Errorf("the directory of %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("the directory of %s, %s, is not a directory", path, dir)
	}
	return nil
}

// notWritable says, after an error creating the lock, where the directory
// a tuner in enforce needs comes from: an install upgraded from a version
// without the lock whose unit file or chart was kept meets a read-only /run
// (systemd's ProtectSystem=strict) or a root-owned one.
func notWritable(err error) string {
	if !errors.Is(err, syscall.EROFS) && !errors.Is(err, fs.ErrPermission) {
		return ""
	}
	return " (a tuner in enforce needs its directory writable: a systemd unit gets it from tuner-enforce.conf's RuntimeDirectory=vgpu-exporter, a pod from the chart's tuner.nodeLock.hostPath mounted there; an empty --tuner.node-lock runs without the lock)"
}

// readNodeLock reads at most nodeLockMax bytes of f from its start.
func readNodeLock(f *os.File) ([]byte, error) {
	return io.ReadAll(io.NewSectionReader(f, 0, nodeLockMax))
}

// holderOf is the note the holder of the lock file f wrote, printable,
// or says there is none.
func holderOf(f *os.File) string {
	b, _ := readNodeLock(f)
	note, ok := bytes.CutPrefix(b, []byte(nodeLockHeader))
	note = bytes.TrimSpace(note)
	if !ok || len(note) == 0 {
		return "no note of its holder: it is starting, or not a tuner"
	}
	if i := bytes.IndexByte(note, '\n'); i >= 0 {
		note = note[:i]
	}
	// C0 and C1 controls, bidirectional overrides and bytes not UTF-8
	// escaped, as other outside text in an error is
	return "its holder wrote: " + clip.Bytes(note, nodeLockMax)
}

// write replaces the lock file's content with the header and note.
func (l *NodeLock) write(note string) error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("writing %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt([]byte(nodeLockHeader+note), 0); err != nil {
		return fmt.Errorf("writing %s: %w", l.path, err)
	}
	return nil
}

// Path is the lock file's path.
func (l *NodeLock) Path() string { return l.path }

// Close releases the lock (the note stays: the next holder replaces it).
func (l *NodeLock) Close() error { return l.f.Close() }

// NodeLockState is what the tuner's status says of the node lock: the file
// this tuner holds, or why it holds none. A tuner refused the lock never
// runs (its exporter exits at start, naming the holder), so none waits.
type NodeLockState struct {
	// Path is the lock file held; "" where none is.
	Path string
	// NotTaken says why none is held (Path "").
	NotTaken NodeLockSkip
}

// NodeLockSkip is why a tuner holds no node lock.
type NodeLockSkip string

const (
	// NodeLockNotEnforcing: no GPU in enforce mode; a tuner that changes
	// nothing takes none.
	NodeLockNotEnforcing NodeLockSkip = "not_enforcing"
	// NodeLockNoFile: --tuner.node-lock is empty; nothing keeps another
	// exporter's tuner off the node's GPUs.
	NodeLockNoFile NodeLockSkip = "no_lock_file"
	// NodeLockSimulated: the simulator's GPUs are the process's own, and
	// --tuner.node-lock was not given.
	NodeLockSimulated NodeLockSkip = "simulated"
)
