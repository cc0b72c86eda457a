package mps

import (
	"context"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
)

// The successor's PID is taken only from a last line "pid=N", and never
// from output cut at the size limit (its last line may be cut too).
func TestSuccessorPIDStrict(t *testing.T) {
	// 1.5 MiB of output kept to the first 1 MiB: the last line kept is
	// "pid=11", cut from "pid=1131071".
	filled := ("012345678\n" + strings.Repeat("pid=1131071\n", command.DefaultMaxOutput/8))[:command.DefaultMaxOutput]
	for _, tc := range []struct {
		name, in string
		pid      uint32
		ok       bool
	}{
		{"pid line", "restarting\npid=4242\n", 4242, true},
		{"pid line with spaces", "  pid=4242  \n\n", 4242, true},
		{"bare number (an HTTP status from curl)", "200", 0, false},
		{"bare number last", "log\n1234\n", 0, false},
		{"signed", "pid=+42", 0, false},
		{"above the PID range", "pid=4194305", 0, false},
		{"trailing text", "pid=42 ok", 0, false},
		{"output cut at the limit", filled, 0, false},
		{"pid line not last", "pid=42\ndone\n", 0, false},
	} {
		if pid, ok := successorPID([]byte(tc.in)); pid != tc.pid || ok != tc.ok {
			t.Errorf("%s: successorPID = %d %v, want %d %v", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
}

// A server's percentage is read back after it is set: a daemon that
// answered nothing and changed nothing, or whose read-back fails, is an
// error naming the server, the GPU and the value read, and nothing is
// recorded as effective.
func TestServerSetVerified(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"ignored", strings.Replace(daemon, `set_active_thread_percentage) echo "$b.0" > "$D/pct.$a" ;;`, `set_active_thread_percentage) ;;`, 1), "reads 100%"},
		{"read-back fails", strings.Replace(daemon, `get_active_thread_percentage) if`, `get_active_thread_percentage) echo "Error: no such server"; exit 0; if`, 1), "reading it back failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.body, "", nil)
			err := r.c.SetMPSActiveThreads(ctx, uuid, 100, 0.4)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "server 100") || !strings.Contains(err.Error(), uuid) {
				t.Fatalf("error %v, want %q naming the server and the GPU", err, tc.want)
			}
			if s, ok := r.c.State(uuid, 100); ok && s.Effective != nil {
				t.Errorf("effective %v recorded for a change the daemon did not make", *s.Effective)
			}
		})
	}
}
