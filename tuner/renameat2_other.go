//go:build !linux

package tuner

import "syscall"

// renameat2NoReplace: no renameat2(2) outside Linux (renameNoReplace
// makes a hard link instead).
var renameat2NoReplace = renameat2Native

func renameat2Native(from, to string) error { return syscall.ENOSYS }
