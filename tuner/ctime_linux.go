package tuner

import (
	"os"
	"syscall"
	"time"
)

// changeTime is fi's status change time (ctime), which no user can set:
// a file written in place with its size and modification time put back
// (cp -p, touch -r) has a new one. Zero where the file system gives none.
func changeTime(fi os.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)) // (int32 on some platforms)
	}
	return time.Time{}
}
