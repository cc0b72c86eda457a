//go:build unix

package httplimit

import "syscall"

// openFilesLimit returns the process's soft limit on open files.
func openFilesLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
