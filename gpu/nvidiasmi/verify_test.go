package nvidiasmi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// identityAnswer answers nvidia-smi's question which GPU GPU-0 is: index 0.
const identityAnswer = `"-i GPU-0 --query-gpu=index,pci.bus_id,uuid --format=csv,noheader") echo "0, 00000000:3B:00.0, GPU-0" ;;`

// nvidia-smi that exits 0 yet did not change the level is caught by the
// read-back (or, where the listing does not say, by what it printed), and
// the error names the program, the GPU and what it printed. Where the
// listing does not say the level, a set that printed no failure is
// accepted.
func TestSetVerified(t *testing.T) {
	ctx := context.Background()
	const list = `"compute-policy -i GPU-0 --list") printf 'GPU 0: compute policies\n    Timeslice : Short\n' ;;
` + identityAnswer
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
			checkSetError(t, err, "nvidia-smi did not set the level", tc.want)
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

// The read-back confirms the set only for the GPU that was set: a listing
// that gives a level for another GPU only (by index, UUID or bus ID), that
// gives different levels without naming the GPUs, or that gives the GPU set
// two levels, is an error naming the command, the GPU and what it printed.
// A listing of every GPU counts the one set, named by UUID, bus ID or
// index (nvidia-smi is asked which GPU that is). A line that names its GPU
// two ways, by index and UUID as `nvidia-smi -L` does, names one GPU where
// both are its names; one naming the GPU set and another is an error.
// (Before, any listing that gave one level, for whichever GPU, was taken
// as confirming the set, and one that gave several was taken as silent;
// a line with two names was taken as two GPUs, the listing as silent, and
// a set that had changed nothing was accepted.)
func TestReadBackChecksTheGPU(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, listing string
		want          string // in the error; "": success
	}{
		{"another GPU's index", `GPU 1: Timeslice: Long`, "lists GPU 1, not GPU GPU-0"},
		{"another GPU's UUID", `GPU-1: Timeslice: Long`, "lists gpu-1, not GPU GPU-0"},
		{"another GPU's bus ID", `GPU 00000000:3C:00.0\n    Timeslice : Long`, "lists 00000000:3c:00.0, not GPU GPU-0"},
		{"two levels, no GPU named", `Timeslice: Long\nTimeslice: Short`, "different levels (long, short) without naming the GPUs"},
		{"named and not", `Timeslice: Long\nGPU 1: Timeslice: Long`, "both for GPUs it names and for none named"},
		{"the GPU set given two levels", `GPU 0: Timeslice: Long\nGPU-0: Timeslice: Short`, "gives GPU GPU-0 different levels (long, short)"},
		{"every GPU, this one not set", `GPU  0: Timeslice: Short\nGPU  1: Timeslice: Long`, "reads short"},
		{"every GPU, this one set", `GPU  0: Timeslice: Long\nGPU  1: Timeslice: Short`, ""},
		{"by UUID", `GPU-0: Timeslice: Long`, ""},
		{"by bus ID", `GPU 0000:3b:00.0\n    Timeslice : Long\nGPU 0000:3c:00.0\n    Timeslice : Default`, ""},
		{"which GPU cannot be asked", `GPU 7: Timeslice: Long`, "asking which is GPU-0 failed"},
		{"by index and UUID, not set", `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n    Timeslice : Default`, "reads default"},
		{"by index and UUID, set", `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n    Timeslice : Long`, ""},
		{"another GPU by index and UUID", `GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n    Timeslice : Long`, "lists GPU 1 (gpu-1), not GPU GPU-0"},
		{"this GPU's index, another's UUID", `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n    Timeslice : Long`, "names GPU 0 (gpu-1) on one line, GPU GPU-0 and another"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := identityAnswer
			if tc.name == "which GPU cannot be asked" {
				ask = ""
			}
			s, _ := newSMI(t, `case "$*" in
"compute-policy -i GPU-0 --list") printf '`+tc.listing+`\n' ;;
`+ask+`
"compute-policy -i GPU-0 --set-timeslice=3") echo "Set timeslice for GPU 0" ;;
*) echo "No devices were found"; exit 6 ;;
esac`, 30*time.Second)
			err := s.SetComputeTimeSlice(ctx, "GPU-0", gpu.TimeSliceLong)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error: the listing does not confirm GPU-0's level")
			}
			for _, w := range []string{tc.want, "GPU GPU-0:", "nvidia-smi compute-policy -i GPU-0 --list", "it printed: " + strings.ReplaceAll(tc.listing, `\n`, "; ")} {
				if !strings.Contains(strings.ReplaceAll(err.Error(), "    ", ""), strings.ReplaceAll(w, "    ", "")) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A listing whose last line has no newline, followed by a warning on
// stderr, still gives its level: the two are not read as one line (before,
// "Timeslice : Short" ran into "Warning: ..." as "ShortWarning", the
// listing was taken as silent, and a set that had changed nothing was
// accepted).
func TestListingWithoutFinalNewline(t *testing.T) {
	for _, tc := range []struct {
		name, listing string
		want          string // in the error; "": success
	}{
		{"reads another level", `printf '    Timeslice : Short'; echo 'Warning: persistence mode is disabled' >&2`, "reads short"},
		{"reads the level set", `printf '    Timeslice : Long'; echo 'Warning: persistence mode is disabled' >&2`, ""},
		{"stdout alone", `printf '    Timeslice : Short'`, "reads short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSMI(t, `case "$*" in
*--list) `+tc.listing+` ;;
*) ;;
esac`, 30*time.Second)
			err := s.SetComputeTimeSlice(context.Background(), "GPU-0", gpu.TimeSliceLong)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one that %s", err, tc.want)
			}
		})
	}
}

// A read-back listing thousands of other GPUs (up to the 1 MiB kept of
// its output) is an error of bounded length that names the first few,
// counts the rest and escapes control characters (before, every GPU was
// named: a 45,000-line listing made a 490 kB error, and each GPU was
// looked up among those before it, some seconds of CPU).
func TestReadBackListingManyGPUs(t *testing.T) {
	s, _ := newSMI(t, `case "$*" in
*--list) printf 'GPU-a\000b Timeslice : Long\n'; awk 'BEGIN{for(i=0;i<20000;i++) printf "GPU-%08d Timeslice : Long\n", i}' ;;
*) ;;
esac`, 30*time.Second)
	err := s.SetComputeTimeSlice(context.Background(), "GPU-0", gpu.TimeSliceLong)
	if err == nil {
		t.Fatal("no error: the listing gives GPU-0 no level")
	}
	msg := err.Error()
	for _, w := range []string{`lists gpu-a\x00b, gpu-00000000, gpu-00000001`, "gpu-00000006 and 19993 more, not GPU GPU-0", "GPU GPU-0:"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q: %.600s", w, msg)
		}
	}
	if len(msg) > 2000 || strings.ContainsRune(msg, 0) {
		t.Errorf("error of %d bytes (raw NUL %v), want under 2000 and escaped: %.600s", len(msg), strings.ContainsRune(msg, 0), msg)
	}
}

// nvidia-smi's answer which GPU is the one set naming another GPU by a
// UUID of 100 kB with control characters is an error of bounded length,
// escaped (before, the UUID was copied into the error whole, raw).
func TestIdentityAnswerBounded(t *testing.T) {
	s, _ := newSMI(t, `case "$*" in
"compute-policy -i GPU-0 --list") printf 'GPU 0: Timeslice: Long\n' ;;
*--query-gpu*) printf '0, 00000000:3B:00.0, GPU-\001'; head -c 100000 /dev/zero | tr '\0' x; echo ;;
*) ;;
esac`, 30*time.Second)
	err := s.SetComputeTimeSlice(context.Background(), "GPU-0", gpu.TimeSliceLong)
	if err == nil {
		t.Fatal("no error: nvidia-smi names another GPU")
	}
	msg := err.Error()
	if !strings.Contains(msg, `it names GPU GPU-\x01xxx`) || len(msg) > 2000 || strings.ContainsRune(msg, 1) {
		t.Errorf("error of %d bytes, want the other GPU named, escaped, under 2000: %.600s", len(msg), msg)
	}
}

// A warning nvidia-smi prints on stderr at every call is not read as part
// of the listing or of the answer which GPU was set: a set the listing
// confirms by index is accepted, one it contradicts is an error (before,
// stdout and stderr were read together: the answer became two lines and
// every set failed "want one line INDEX, BUS_ID, UUID", and a warning
// saying "unable" made the listing no reading, so a set that had changed
// nothing was accepted unverified, or, where the set printed it too,
// reported failed). The warning is still shown in errors.
func TestStderrWarningsNotRead(t *testing.T) {
	for _, tc := range []struct {
		name, warning, level string // the level listed
		want                 []string
	}{
		{"listed by index, set", "Warning: persistence mode is disabled", "Long", nil},
		{"listed by index, not set", "Warning: persistence mode is disabled", "Short", []string{"reads short", "on stderr: Warning: persistence mode is disabled"}},
		{"a warning with a failure word, set", "Warning: unable to determine persistence mode", "Long", nil},
		{"a warning with a failure word, not set", "Warning: unable to determine persistence mode", "Short", []string{"reads short", "on stderr: Warning: unable to determine persistence mode"}},
		{"the listing's warning alone, not set", "", "Short", []string{"reads short", "on stderr: Warning: unable to determine persistence mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listWarning := ""
			if tc.warning == "" {
				listWarning = `echo "Warning: unable to determine persistence mode" >&2; `
			}
			s, _ := newSMI(t, `echo "`+tc.warning+`" >&2
case "$*" in
"compute-policy -i GPU-0 --list") `+listWarning+`printf 'GPU 0: compute policies\n    Timeslice : `+tc.level+`\n' ;;
`+identityAnswer+`
*) echo "Set timeslice for GPU 0" ;;
esac`, 30*time.Second)
			err := s.SetComputeTimeSlice(context.Background(), "GPU-0", gpu.TimeSliceLong)
			checkSetError(t, err, "the listing reads another level", tc.want)
		})
	}
}

// An error naming other GPUs a listing gives levels for keeps the count of
// those it leaves out however long their names (before, the joined list
// was cut at 512 bytes: twenty names of 1000 bytes lost "and 12 more").
func TestReadBackLongGPUNamesCounted(t *testing.T) {
	s, _ := newSMI(t, `case "$*" in
*--list) awk 'BEGIN{for(i=0;i<20;i++){printf "GPU-%02d", i; for(j=0;j<1000;j++) printf "x"; print " Timeslice : Long"}}' ;;
*) ;;
esac`, 30*time.Second)
	err := s.SetComputeTimeSlice(context.Background(), "GPU-0", gpu.TimeSliceLong)
	if err == nil {
		t.Fatal("no error: the listing gives GPU-0 no level")
	}
	msg := err.Error()
	if !strings.Contains(msg, "and 12 more, not GPU GPU-0") || !strings.Contains(msg, "gpu-07xxx") {
		t.Errorf("error lacks the eighth GPU or the count of the rest: %.1500s", msg)
	}
	if len(msg) > 3000 {
		t.Errorf("error of %d bytes, want under 3000", len(msg))
	}
}

// checkSetError fails t unless err is nil where want is nil, or else an
// error holding each of want; noError says why no error is wrong.
func checkSetError(t *testing.T, err error, noError string, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("error %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error: %s", noError)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
