package mps

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// TestClientAtOrAboveServer: a client's value can only lower its server's,
// so a fraction at or above the server's is the server's: the client is
// restarted with its server's value. 1, the fraction of a client nobody
// capped, so sets a capped client back where its server runs at 50%.
// Before, a fraction above the server's was refused, and the tuner's
// restore of 1 failed at every exit, the client kept its cap.
func TestClientAtOrAboveServer(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		fraction float64
		pending  string
		env      string // the successor's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
	}{
		{"below the server's: its own cap", 0.3, "0.3", "30"},
		{"at the server's", 0.5, "0.5", "50"},
		{"above the server's: the server's", 0.8, "0.5", "50"},
		{"1, as nobody capped it: the server's", 1, "0.5", "50"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, daemon, hookEnv+`echo done`, nil)
			if err := r.c.SetMPSActiveThreads(ctx, uuid, 200, 0.5); err != nil {
				t.Fatal(err)
			}
			if err := r.c.SetMPSActiveThreads(ctx, uuid, 201, tc.fraction); err != nil {
				t.Fatalf("client at %v under its server's 50%%: %v", tc.fraction, err)
			}
			if s, _ := r.c.State(uuid, 201); fstr(s.Pending) != tc.pending {
				t.Errorf("pending %s, want %s", fstr(s.Pending), tc.pending)
			}
			if err := r.c.RestartClient(ctx, uuid, 201, "tenant-201"); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(r.fake.Dir, "hook.env"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + tc.env + "\n"; !strings.Contains(string(data), want) {
				t.Errorf("hook environment %q lacks %q", data, want)
			}
			if s, _ := r.c.State(uuid, 201); fstr(s.Pending) != "nil" || fstr(s.Effective) != tc.pending {
				t.Errorf("after the restart: pending %s effective %s, want nil %s", fstr(s.Pending), fstr(s.Effective), tc.pending)
			}
		})
	}
}

// TestHeldFraction: the fraction a client runs with once set and
// restarted is the whole percentage sent, at most its server's value as
// last read; a client whose server was not read is only rounded.
func TestHeldFraction(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, daemon, "", nil)
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 200, 0.5); err != nil {
		t.Fatal(err)
	}
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 201, 0.3); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		pid      uint32
		fraction float64
		want     float64
	}{
		{"a thousandth: the whole percentage sent", 201, 0.125, 0.13},
		{"a whole percentage", 201, 0.3, 0.3},
		{"above the server's: the server's", 201, 0.8, 0.5},
		{"1: the server's", 201, 1, 0.5},
		{"server not read: 1", 101, 1, 1},
		{"server not read: rounded up to 1%", 101, 0.001, 0.01},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.c.HeldFraction(uuid, tc.pid, tc.fraction); got != tc.want {
				t.Errorf("HeldFraction(%d, %v) = %v, want %v", tc.pid, tc.fraction, got, tc.want)
			}
		})
	}
}

// TestHeldFractionServerRaised: a fraction held back by its server's value
// (ClientState.Server) is held back by the value read again once that is a
// minute old, one read for all the server's clients: the operator raised
// the server from 50% to 100% (set_active_thread_percentage 100 100 by
// hand), and a client clamped to 50% is held at 0.8 asked. Before, the
// value last read (50%) held every fraction asked back for the client's
// life, and the policy never asked 0.8 again. Nothing is read for a
// fraction the server's value does not hold back, and nothing by
// CachedHeldFraction, which holds it back at the value last read however
// old (before, there was no way to ask without a daemon command).
func TestHeldFractionServerRaised(t *testing.T) {
	ctx := context.Background()
	clk := gpu.NewManualClock(time.Unix(1000, 0))
	r := newRig(t, daemon, "", func(o *Options) { o.Clock = clk })
	if err := r.c.SetMPSActiveThreads(ctx, uuid, 100, 0.5); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.fake.Dir, "pct.100"), []byte("100.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		advance  time.Duration
		pid      uint32
		fraction float64
		cached   bool // CachedHeldFraction
		want     float64
		commands []string // the daemon commands sent
	}{
		{"not held back: nothing read", 0, 101, 0.3, false, 0.3, nil},
		{"held back, read within the minute: the value read", 30 * time.Second, 101, 0.8, false, 0.5, nil},
		{"held back, read a minute ago, cached: the value read, nothing sent", 30 * time.Second, 101, 0.8, true, 0.5, nil},
		{"held back, read a minute ago: read again", 0, 101, 0.8, false, 0.8, []string{"get_active_thread_percentage 100"}},
		{"the server's other client: read with it", 0, 102, 0.8, false, 0.8, nil},
		{"1: the server's 100%", time.Hour, 102, 1, false, 1, nil},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		before := len(r.commands(t))
		held := r.c.HeldFraction
		if st.cached {
			held = r.c.CachedHeldFraction
		}
		if got := held(uuid, st.pid, st.fraction); got != st.want {
			t.Errorf("%s: held fraction (%d, %v) = %v, want %v", st.name, st.pid, st.fraction, got, st.want)
		}
		if got := r.commands(t)[before:]; !slices.Equal(got, st.commands) {
			t.Errorf("%s: commands %q, want %q", st.name, got, st.commands)
		}
	}
}
