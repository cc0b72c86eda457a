package tenant

import (
	"bytes"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/go-kit/log"
)

// hidepid=1, no CAP_SYS_PTRACE: every other user's /proc/PID/cgroup is
// EPERM, on every sample, forever. One GPU process exited first (ENOENT).
// The operator must be told the exporter lacks access, not that a process
// is gone.
// A cgroup file the exporter may not open (hidepid without
// CAP_SYS_PTRACE) is logged as that, once, whatever was logged before it:
// not as a process gone, and not hidden behind one that exited first.
// Before, both shared one line, "its /proc entry is gone".
func TestCgroupPermissionDeniedLoggedAsSuch(t *testing.T) {
	var buf bytes.Buffer
	logger := log.NewLogfmtLogger(&buf)
	a := newAttrState()
	denied := &fs.PathError{Op: "stat", Path: "/host/proc/40/cgroup", Err: syscall.EPERM}
	a.logCgroupErr(logger, 40, denied)
	if out := buf.String(); strings.Contains(out, "is gone") {
		t.Errorf("EPERM (the exporter may not read it) logged as a process gone:\n%s", out)
	}
	buf.Reset()
	a = newAttrState()
	gone := &fs.PathError{Op: "stat", Path: "/host/proc/41/cgroup", Err: syscall.ENOENT}
	a.logCgroupErr(logger, 41, gone) // a process that exited: routine
	for pid := uint32(40); pid < 50; pid++ {
		a.logCgroupErr(logger, pid, denied)
	}
	if out := buf.String(); !strings.Contains(out, "not permitted") || !strings.Contains(out, "may not read") {
		t.Errorf("EPERM on every sample never logged once a process exited first:\n%s", out)
	}
}
