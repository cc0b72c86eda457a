package tuner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// closer records its closes among the actuator's calls and answers err.
type closer struct {
	calls *fakeControl
	n     int
	err   error
}

func (c *closer) Close() error {
	c.n++
	_ = c.calls.Do("Close", "")
	return c.err
}

// The restore at exit closes what CloseAtExit names, once each, after
// the originals are set back, and a close that fails makes it fail.
func TestRestoreAtExitCloses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		errs    []error
		wantErr string
	}{
		{"none", nil, ""},
		{"one", []error{nil}, ""},
		{"two, the first fails", []error{errors.New("tenant t not thawed"), nil}, "tenant t not thawed"},
		{"two, the second fails", []error{nil, errors.New("tenant t not thawed")}, "tenant t not thawed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fakeControl{}
			tu, err := New(Options{Policy: fixed{mpsAction(7, 1, 0.4)}, Actuators: ActuatorsOf(rec), Clock: gpu.NewManualClock(t0), Mode: ModeEnforce})
			if err != nil {
				t.Fatal(err)
			}
			snap := emptySnap(t0)
			if _, err := tu.RunOnce(context.Background(), snap); err != nil {
				t.Fatal(err)
			}
			r := NewRunner(tu, nil, gpu.NewManualClock(t0), 0, func() *tenant.Snapshot { return snap }, nil)
			var cs []*closer
			for _, e := range tc.errs {
				c := &closer{calls: rec, err: e}
				cs = append(cs, c)
				r.CloseAtExit(c)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r.Run(ctx) // returns at once: its context is done
			err = r.RestoreAtExit()
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("RestoreAtExit: %v, want an error containing %q", err, tc.wantErr)
			}
			for i, c := range cs {
				if c.n != 1 {
					t.Errorf("closer %d closed %d times, want 1", i, c.n)
				}
			}
			// the original set back first, then every close
			want := []string{"SetMPSActiveThreads(" + uuid0 + ",7,0.4000)", "RestartClient(" + uuid0 + ",7)",
				"SetMPSActiveThreads(" + uuid0 + ",7,1.0000)", "RestartClient(" + uuid0 + ",7)"}
			for range cs {
				want = append(want, "Close()")
			}
			if !slices.Equal(rec.Calls, want) {
				t.Errorf("calls %q, want %q", rec.Calls, want)
			}
		})
	}
}
