package nvidiasmi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// nvidia-smi that exits 0 yet did not change the level is caught by the
// read-back (or, where the listing does not say, by what it printed), and
// the error names the program, the GPU and what it printed. Where the
// listing does not say the level, a set that printed no failure is
// accepted.
func TestSetVerified(t *testing.T) {
	ctx := context.Background()
	const list = `"compute-policy -i GPU-0 --list") printf 'GPU 0: compute policies\n    Timeslice : Short\n' ;;`
	for _, tc := range []struct {
		name, body string
		want       []string // in the error; nil: success
	}{
		{"agrees", `case "$*" in
"compute-policy -i GPU-0 --list") printf '    Timeslice : Long\n' ;;
esac`, nil},
		{"failure printed, exit 0", `case "$*" in
` + list + `
*) echo "Failed to set compute policy for GPU 00000000:3B:00.0: Insufficient Permissions" ;;
esac`, []string{"nvidia-smi", "GPU-0", "reads short", "Insufficient Permissions"}},
		{"silently ignored", `case "$*" in
` + list + `
*) echo "Set timeslice for GPU 0" ;;
esac`, []string{"nvidia-smi", "GPU-0", "reads short", "Set timeslice for GPU 0"}},
		{"failure printed, listing silent", `case "$*" in
*--list) echo "Compute policies: (none listed)" ;;
*) echo "ERROR: Unable to set the timeslice: Not Supported" >&2 ;;
esac`, []string{"nvidia-smi", "GPU-0", "Unable to set the timeslice"}},
		{"listing silent", `case "$*" in
*--list) echo "Compute policies: (none listed)" ;;
*) ;;
esac`, nil},
		{"listing is an error message", `case "$*" in
*--list) echo "Failed to read the timeslice policy; using Default" ;;
*) echo "Set timeslice for GPU 0" ;;
esac`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSMI(t, tc.body, 30*time.Second)
			err := s.SetComputeTimeSlice(ctx, "GPU-0", gpu.TimeSliceLong)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error: nvidia-smi did not set the level")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A set that exited 0 whose read-back is not supported (exit 3) failed; it
// is no refusal, which tells the tuner that nothing was changed (it then
// drops the original it keeps, and the level set, if it was, stays).
func TestReadBackNotSupportedIsNoRefusal(t *testing.T) {
	s, _ := newSMI(t, `case "$*" in
*--list) echo "Not Supported"; exit 3 ;;
*) echo "Set timeslice for GPU 0" ;;
esac`, 30*time.Second)
	err := s.SetComputeTimeSlice(context.Background(), "GPU-0", gpu.TimeSliceLong)
	if err == nil || !strings.Contains(err.Error(), "reading it back failed") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("error %v, want the read-back's failure", err)
	}
	if errors.Is(err, gpu.ErrNotSupported) {
		t.Errorf("error %v is gpu.ErrNotSupported: a refusal, though the set exited 0", err)
	}
}
