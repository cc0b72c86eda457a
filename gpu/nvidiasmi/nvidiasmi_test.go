package nvidiasmi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

// smi answers like nvidia-smi with compute-policy: the level set is kept
// in a file and listed back.
const smi = `case "$*" in
"compute-policy --help") echo "    [--set-timeslice]: Set timeslice config for a GPU: 0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG" ;;
"compute-policy -i GPU-0 --list") l=$(cat "$D/level" 2>/dev/null || echo Default); printf 'GPU 0: compute policies\n    Timeslice : %s\n' "$l" ;;
"-i GPU-0 --query-gpu=index,pci.bus_id,uuid --format=csv,noheader") echo "0, 00000000:3B:00.0, GPU-0" ;;
"compute-policy -i GPU-0 --set-timeslice="*) n=${4#--set-timeslice=}; case $n in 0) echo Default;; 1) echo Short;; 2) echo Medium;; 3) echo Long;; esac > "$D/level"; echo "Set timeslice for GPU 0" ;;
*) echo "No devices were found" >&2; exit 6 ;;
esac`

func newSMI(t *testing.T, body string, timeout time.Duration) (*SMI, *commandtest.Fake) {
	t.Helper()
	f := commandtest.New(t)
	return New(Options{Path: f.Script(t, "nvidia-smi", body), Timeout: timeout}), f
}

func TestSet(t *testing.T) {
	ctx := context.Background()
	s, f := newSMI(t, smi, 30*time.Second)
	for i, l := range []gpu.TimeSliceLevel{gpu.TimeSliceLong, gpu.TimeSliceShort, gpu.TimeSliceMedium, gpu.TimeSliceDefault} {
		if err := s.SetComputeTimeSlice(ctx, "GPU-0", l); err != nil {
			t.Fatal(err)
		}
		calls := f.Calls(t, "nvidia-smi")
		want := []string{"compute-policy", "-i", "GPU-0", fmt.Sprintf("--set-timeslice=%d", map[gpu.TimeSliceLevel]int{"default": 0, "short": 1, "medium": 2, "long": 3}[l])}
		// The set, then its read-back, which names the GPU by index: which
		// GPU that is is asked.
		if got := calls[len(calls)-3]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d: nvidia-smi %q, want %q", i, got, want)
		}
		if got := calls[len(calls)-2]; fmt.Sprint(got) != "[compute-policy -i GPU-0 --list]" {
			t.Errorf("step %d: nvidia-smi %q, want the read-back", i, got)
		}
		if got := calls[len(calls)-1]; fmt.Sprint(got) != fmt.Sprint(identityArgs("GPU-0")) {
			t.Errorf("step %d: nvidia-smi %q, want the GPU's identity asked", i, got)
		}
	}
}

func TestSetRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, body, uuid string
		level            gpu.TimeSliceLevel
		is               error
		want             string
		calls            int
	}{
		{"unknown level", smi, "GPU-0", "huge", nil, `unknown compute time-slice level "huge"`, 0},
		{"id that looks like an option", smi, "-h", gpu.TimeSliceLong, nil, "invalid GPU id", 0},
		{"not root", `echo "Insufficient Permissions" >&2; exit 4`, "GPU-0", gpu.TimeSliceLong, nil, "needs root", 1},
		{"not supported", `echo "Not Supported" >&2; exit 3`, "GPU-0", gpu.TimeSliceLong, gpu.ErrNotSupported, "Not Supported", 1},
		{"unknown GPU", smi, "GPU-9", gpu.TimeSliceLong, nil, "not found by nvidia-smi", 1},
		{"no driver", `echo "NVIDIA-SMI has failed" >&2; exit 9`, "GPU-0", gpu.TimeSliceLong, nil, "driver is not loaded", 1},
		{"other failure", `exit 15`, "GPU-0", gpu.TimeSliceLong, nil, "exit status 15", 1},
		{"hang", `sleep 30`, "GPU-0", gpu.TimeSliceLong, nil, "killed after its timeout", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A fake that answers gets ample time (a loaded machine may
			// take long to start a shell); the one that hangs is killed
			// after 200 ms, perhaps before its shell recorded the call.
			timeout := 30 * time.Second
			if tc.name == "hang" {
				timeout = 200 * time.Millisecond
			}
			s, f := newSMI(t, tc.body, timeout)
			err := s.SetComputeTimeSlice(ctx, tc.uuid, tc.level)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if n := len(f.Calls(t, "nvidia-smi")); n != tc.calls && (tc.name != "hang" || n > tc.calls) {
				t.Errorf("%d nvidia-smi runs, want %d", n, tc.calls)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	ctx := context.Background()
	f := commandtest.New(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"has compute-policy", smi, ""},
		{"old driver", `echo "Usage: compute-policy [--list]"`, "no --set-timeslice"},
		{"fails", `exit 9`, "not usable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.Script(t, "smi-"+strings.ReplaceAll(tc.name, " ", "-"), tc.body)
			s, err := Detect(ctx, Options{Path: p})
			if tc.want == "" {
				if err != nil || s == nil {
					t.Fatalf("Detect: %v", err)
				}
				if got := fmt.Sprint(s.Capabilities("GPU-0")); got != "[compute_timeslice]" {
					t.Errorf("Capabilities = %s", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Detect error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Detect(ctx, Options{Path: filepath.Join(f.Dir, "absent")}); err == nil || !strings.Contains(err.Error(), "--nvidia-smi.path") {
		t.Errorf("missing binary: %v, want the flag named", err)
	}
}

func TestParseListing(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // each entry's GPU and level
		ok   bool
	}{
		{"    Timeslice : Long\n", "[(none named) long]", true},
		{"| 0  Time Slice   MEDIUM |", "[(none named) medium]", true},
		{"GPU 0: Timeslice=short\nGPU 0: Timeslice=short", "[GPU 0 short GPU 0 short]", true},
		{"GPU  0: Timeslice: Default\nGPU  1: Timeslice: Long\n", "[GPU 0 default GPU 1 long]", true},
		{"GPU 00000000:3B:00.0\n    Timeslice : Long\nGPU 0000:3c:00.0\n    Timeslice : Short", "[00000000:3b:00.0 long 00000000:3c:00.0 short]", true},
		{"GPU-5c2d1e7a-0b1c-4d2e-9f30-aa11bb22cc33: Timeslice: Medium", "[gpu-5c2d1e7a-0b1c-4d2e-9f30-aa11bb22cc33 medium]", true},
		{"Timeslice: Long\nTimeslice: Short", "[(none named) long (none named) short]", true},
		{"GPU 0 GPU 1: Timeslice: Long", "[GPU 0 (GPU 1) long]", true},
		{"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n    Timeslice : Default", "[GPU 0 (gpu-0) default]", true},
		{"Timeslice: Long Short", "", false},
		{"Default", "", false},
		{"Timeslice: 2", "", false},
		{"Timeslices: Long", "", false},
		{"", "", false},
	} {
		e, ok := parseListing([]byte(tc.in))
		var got []string
		for _, x := range e {
			got = append(got, x.gpu.String(), string(x.level))
		}
		if ok != tc.ok || ok && fmt.Sprint(got) != tc.want {
			t.Errorf("parseListing(%q) = %v %v, want %s %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseListing(f *testing.F) {
	for _, s := range []string{"Timeslice : Long", "time slice default\ntimeslice long", "GPU 0: Timeslice: Short\nGPU 00000000:3B:00.0\nTimeslice: long",
		"GPU-0 timeslice medium", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n    Timeslice : Default", "\xff\x00", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, ok := parseListing(b)
		if ok != (len(entries) > 0) {
			t.Fatalf("parseListing(%q) = %v %v", b, entries, ok)
		}
		low := strings.ToLower(string(b))
		for _, e := range entries {
			if !slices.Contains(levels, e.level) || !strings.Contains(low, string(e.level)) {
				t.Fatalf("parseListing(%q): level %q, not in the input", b, e.level)
			}
			for _, r := range e.gpu {
				if r.kind == refUUID && !strings.Contains(low, r.id) || r.kind == refIndex && !strings.Contains(low, r.id) {
					t.Fatalf("parseListing(%q): GPU %v, not in the input", b, r)
				}
			}
		}
	})
}

func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"0, 00000000:3B:00.0, GPU-0", "1, 0000:3b:00.0, gpu-0\n", "0,00000000:3B:00.0,GPU-0\n1, 00000000:3C:00.0, GPU-1", "x, y, GPU-0", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseIdentity(b, "GPU-0")
		if err != nil {
			return
		}
		if id.uuid != "gpu-0" || busID(id.bus) != id.bus || id.index == "" || strings.Trim(id.index, "0123456789") != "" {
			t.Fatalf("parseIdentity(%q) = %+v", b, id)
		}
		if !id.is(gpuRef{refUUID, "gpu-0"}) || !id.is(gpuRef{refBus, id.bus}) || !id.is(gpuRef{refIndex, id.index}) || id.is(gpuRef{}) {
			t.Fatalf("parseIdentity(%q) = %+v, which does not name itself", b, id)
		}
	})
}
