package systemd

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// TestNotify runs the exporter as the unit's Type=notify has systemd run
// it, NOTIFY_SOCKET set to a socket of the test's: how long its start may
// take, READY=1 once its port accepts, STOPPING=1 at SIGTERM with how long
// the stop may take, then exit 0; a start that fails (a bad
// flag, a taken port) exits non-zero having said nothing, so `systemctl
// start` fails with it instead of reporting a started service.
func TestNotify(t *testing.T) {
	bin := repo.Exporter(t)
	for _, tc := range []struct {
		name  string
		args  []string
		taken bool // the listen address is taken
		ok    bool
	}{
		{"serves", []string{"--backend=sim"}, false, true},
		{"bad flag", []string{"--backend=sim", "--no-such-flag"}, false, false},
		{"port taken", []string{"--backend=sim"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "notify")
			sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			addr := repo.FreeAddr(t)
			if tc.taken {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var logs strings.Builder
			cmd := exec.CommandContext(ctx, bin, append(tc.args, "--web.listen-address="+addr)...)
			cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+path)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() { _ = cmd.Process.Kill(); <-exited }()
			states := make(chan string, 4)
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := sock.Read(buf)
					if err != nil {
						close(states)
						return
					}
					states <- string(buf[:n])
				}
			}()
			if !tc.ok {
				select {
				case err := <-exited:
					exited <- err
					if err == nil {
						t.Fatalf("exit 0, want a failure\n%s", logs.String())
					}
				case <-ctx.Done():
					t.Fatal("no exit")
				}
				sock.SetReadDeadline(time.Now()) // what was sent is queued by now
				for s := range states {
					if strings.Contains(s, "READY=1") {
						t.Errorf("sent %q, want no READY=1 from a start that fails", s)
					}
				}
				return
			}
			for ready := false; !ready; {
				select {
				case s := <-states:
					ready = s == "READY=1"
					if !ready && !strings.HasPrefix(s, "EXTEND_TIMEOUT_USEC=") { // (how long the start may take)
						t.Fatalf("sent %q, want READY=1\n%s", s, logs.String())
					}
				case err := <-exited:
					exited <- err
					t.Fatalf("exited (%v) without READY=1\n%s", err, logs.String())
				case <-ctx.Done():
					t.Fatalf("no READY=1\n%s", logs.String())
				}
			}
			conn, err := net.Dial("tcp", addr) // ready means accepting: no wait
			if err != nil {
				t.Fatalf("READY=1 sent, but the port refuses: %v", err)
			}
			conn.Close()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if s := <-states; !strings.HasPrefix(s, "STOPPING=1\nEXTEND_TIMEOUT_USEC=") {
				t.Errorf("sent %q at SIGTERM, want STOPPING=1 and how long the stop may take", s)
			}
			err = <-exited
			exited <- err
			if err != nil {
				t.Errorf("exit after SIGTERM: %v, want 0\n%s", err, logs.String())
			}
		})
	}
}
