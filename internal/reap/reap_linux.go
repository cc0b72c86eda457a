package reap

import (
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported says whether this system can reap orphans.
const Supported = true

// siginfoPID is where waitid's siginfo keeps the child's PID: after three
// int32 fields, at the union, which is aligned as a pointer.
const siginfoPID = 3*4 + (unsafe.Sizeof(uintptr(0)) - 4)

// nextZombie returns a child that has ended and is not waited for yet,
// leaving it as it is (WNOWAIT); false when there is none.
func nextZombie() (int, bool) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, false // ECHILD: no children at all
		}
		pid := int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), siginfoPID)))
		return pid, pid > 0
	}
}

// reapPID waits for the ended child pid and says how it ended.
func reapPID(pid int) (string, bool) {
	var ws unix.WaitStatus
	for {
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || got != pid {
			return "", false
		}
		switch {
		case ws.Exited():
			return "exit status " + strconv.Itoa(ws.ExitStatus()), true
		case ws.Signaled():
			return "signal: " + ws.Signal().String(), true
		}
		return "ended", true
	}
}
