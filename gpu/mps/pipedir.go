package mps

import (
	"fmt"
	"os"
	"syscall"
)

// checkPipeDirectory says why dir may not be the pipe directory of a
// daemon the exporter (effective UID euid) commands; nil where it may. The
// control client talks to whatever daemon listens in the directory, and
// the daemon takes a root client's commands: a directory a tenant made (the
// default /tmp/nvidia-mps, made first on a shared /tmp) or may write to (a
// pipe of its own put in place) would have the exporter command a tenant's
// daemon. So the directory must be a directory itself (not a symbolic
// link, which its owner may point anywhere), owned by root or by the
// exporter's user, and writable by its owner alone, or sticky (as /tmp
// is: others may add their own files there but not rename or remove the
// owner's pipes, so a layout that lets the clients' users write there is
// taken). Its parent directories are not checked.
func checkPipeDirectory(dir string, euid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("MPS pipe directory %s missing, so no MPS control daemon uses it (start `nvidia-cuda-mps-control -d` as root with CUDA_MPS_PIPE_DIRECTORY=%[1]s; on Kubernetes mount the device plugin's /run/nvidia/mps/RESOURCE/pipe, e.g. /run/nvidia/mps/nvidia.com/gpu/pipe, and set --mps.pipe-directory to it)", dir)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		to, _ := os.Readlink(dir)
		return fmt.Errorf("MPS pipe directory %s is a symbolic link (to %q), which its owner may point at another daemon: set --mps.pipe-directory to the directory itself", dir, to)
	}
	if !fi.IsDir() {
		return fmt.Errorf("MPS pipe directory %s is not a directory (mode %s): set --mps.pipe-directory to the daemon's CUDA_MPS_PIPE_DIRECTORY", dir, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("MPS pipe directory %s: its owner cannot be read", dir)
	}
	if uid := int(st.Uid); (uid != 0 && uid != euid) || fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("MPS pipe directory %s is owned by uid %d with mode %s: a control daemon there may be another user's (a tenant's), which the exporter would command; it must be owned by root or by the exporter's uid %d and writable by its owner alone or sticky (start the daemon as root with CUDA_MPS_PIPE_DIRECTORY on a path only root can write to, such as /run/nvidia/mps, and set --mps.pipe-directory to it; or `chown root %[1]s && chmod go-w %[1]s` where the daemon there is trusted)",
			dir, uid, fi.Mode(), euid)
	}
	return nil
}
