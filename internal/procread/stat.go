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
