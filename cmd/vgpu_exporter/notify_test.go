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
// port accepts, and STOPPING=1 as it shuts down; a start that fails to
// serve says nothing, so `systemctl start` fails with it.
func TestSystemdNotify(t *testing.T) {
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
				if got := nextState(t, c, 100*time.Millisecond); got != "STOPPING=1" {
					t.Errorf("sent %q, want STOPPING=1 alone, no READY=1", got)
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
			if got := nextState(t, c, 20*time.Second); got != "STOPPING=1" {
				t.Errorf("sent %q at shutdown, want STOPPING=1", got)
			}
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
}
