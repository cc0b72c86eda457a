package tuner

import "golang.org/x/sys/unix"

// renameat2NoReplace is renameat2(2) with RENAME_NOREPLACE: from renamed
// to to where nothing is at to, atomically (tests replace it, to have the
// file system refuse it).
var renameat2NoReplace = renameat2Native

func renameat2Native(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
