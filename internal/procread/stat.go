package procread

import (
	"bytes"
	"strconv"
)

// StartTime returns the start time (field 22, clock ticks after boot) of
// a /proc/PID/stat line; false where the line is not one. The command
// name (field 2) is in parentheses and may hold spaces and parentheses of
// its own: the fields are counted after the last ')'. With the host's
// boot, a PID and its start time name one process: a PID reused has
// another.
func StartTime(stat []byte) (string, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 { // state (3) ... starttime (22)
		return "", false
	}
	if _, err := strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return "", false
	}
	return string(f[19]), true
}

// ParentPID returns the parent's PID (field 4) of a /proc/PID/stat line;
// false where the line is not one.
func ParentPID(stat []byte) (uint32, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 2 { // state (3) ppid (4)
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[1]), 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}
