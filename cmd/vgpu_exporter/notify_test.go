package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// notifySocket listens where systemd's NOTIFY_SOCKET would be and points
// the variable at it for the test.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

// nextState reads the next state sent, or "" once wait has passed.
func nextState(t *testing.T, c *net.UnixConn, wait time.Duration) string {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// Under systemd (NOTIFY_SOCKET set) the exporter says READY=1 once its
// port accepts, and STOPPING=1 as it shuts down, with how long that may
// take (no tuner: shutdownTimeout and the margin, 15 s); a start that
// fails to serve never says READY=1, so `systemctl start` fails with it.
func TestSystemdNotify(t *testing.T) {
	const stopping = "STOPPING=1\nEXTEND_TIMEOUT_USEC=15000000"
	for _, tc := range []struct {
		name  string
		taken bool // the listen address is taken: the serve fails
	}{
		{"serves", false},
		{"address taken", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := notifySocket(t)
			addr := freeAddr(t)
			if tc.taken {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
			}
			cfg := testConfig(t, "--web.listen-address="+addr, "--sample.interval=1h")
			svc := newService(&fakeSource{}, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			done := make(chan error, 1)
			go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, make(chan os.Signal)) }()
			if tc.taken {
				if err := <-done; err == nil {
					t.Fatal("served on a taken address")
				}
				if got := nextState(t, c, 100*time.Millisecond); got != stopping {
					t.Errorf("sent %q, want %q alone, no READY=1", got, stopping)
				}
				return
			}
			if got := nextState(t, c, 20*time.Second); got != "READY=1" {
				t.Fatalf("sent %q, want READY=1", got)
			}
			// ready means accepting: no wait
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("READY=1 sent, but the port refuses: %v", err)
			}
			conn.Close()
			cancel()
			if got := nextState(t, c, 20*time.Second); got != stopping {
				t.Errorf("sent %q at shutdown, want %q", got, stopping)
			}
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
}

// The bounds said to systemd cover every wait of the start and the stop:
// a restore timeout raised for a slow hook raises them, so a unit's
// TimeoutStopSec left at its default does not cut the restore.
func TestNotifyBounds(t *testing.T) {
	for _, tc := range []struct {
		restore     time.Duration
		tuner       bool
		stop, start string
	}{
		{30 * time.Second, false, "EXTEND_TIMEOUT_USEC=15000000", "EXTEND_TIMEOUT_USEC=125000000"},
		{30 * time.Second, true, "EXTEND_TIMEOUT_USEC=45000000", "EXTEND_TIMEOUT_USEC=125000000"},
		{150 * time.Second, true, "EXTEND_TIMEOUT_USEC=165000000", "EXTEND_TIMEOUT_USEC=215000000"},
		{time.Second, true, "EXTEND_TIMEOUT_USEC=16000000", "EXTEND_TIMEOUT_USEC=125000000"},
	} {
		if got := extend(stopBound(tc.restore, tc.tuner)); got != tc.stop {
			t.Errorf("stop, restore %v, tuner %v: %s, want %s", tc.restore, tc.tuner, got, tc.stop)
		}
		cfg := testConfig(t, "--tuner.restore-timeout="+tc.restore.String())
		if got := extend(startBound(cfg)); got != tc.start {
			t.Errorf("start, restore %v: %s, want %s", tc.restore, got, tc.start)
		}
	}
}
