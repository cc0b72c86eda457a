package dcgmexp

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// MIG series were matched by GPU_I_ID alone: after a MIG relayout that
// dcgm-exporter has not seen, its series of GPU_I_ID 1 (a 3g.71gb) filled
// the host's GPU_I_ID 1 (now a 1g.18gb) with another instance's activity.
// A series whose GPU_I_PROFILE is not the profile of the host's instance
// at its GPU_I_ID is now left out, with a warning naming the page, the
// GPU and the instance; where either profile gives no shape, no
// comparison is sound and the series is taken as before.
func TestMIGSeriesOfAnotherProfileLeftOut(t *testing.T) {
	line := func(profile string, gi int, v string) string {
		p := ""
		if profile != "" {
			p = fmt.Sprintf(",GPU_I_PROFILE=%q", profile)
		}
		return fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=%q%s,GPU_I_ID=\"%d\"} %s\n", uuidC, p, gi, v)
	}
	for _, tc := range []struct {
		name       string
		page, host string // instance 1's profiles
		built      bool
		taken      bool
	}{
		{"the same profile", "3g.71gb", "3g.71gb", false, true},
		{"relaid out: other slices", "3g.71gb", "1g.18gb", false, false},
		{"relaid out: the same slices, twice the memory", "1g.18gb", "1g.35gb", false, false},
		{"memory rounded otherwise", "4g.95gb", "4g.96gb", false, true},
		{"a variant the host's built name lacks", "1g.24gb+gfx", "1g.24gb", true, true},
		{"the host's profile unread", "3g.71gb", "", false, true},
		{"no GPU_I_PROFILE on the page", "", "3g.71gb", false, true},
		{"a page's profile of no shape", "MIG-weird", "3g.71gb", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, []byte(line(tc.page, 1, "0.5")+line("4g.71gb", 2, "0.25")), nil)
			dev := migDevice()
			dev.MIG[0].Profile, dev.MIG[0].ProfileBuilt = tc.host, tc.built
			inner := &fakeSource{rd: &gpu.Readings{Devices: []gpu.Device{dev}}}
			var logs bytes.Buffer
			s := newSource(t, inner, Options{URL: srv.URL + "/metrics", Logger: log.NewLogfmtLogger(&logs)})
			d := sampleOnce(t, s).Devices[0]
			if got := d.MIG[0].Activity.SMActive != nil; got != tc.taken {
				t.Errorf("instance 1 filled %v, want %v", got, tc.taken)
			}
			if a := d.MIG[1].Activity.SMActive; a == nil || *a != 0.25 {
				t.Errorf("instance 2: SM active %s, want 0.25", show(a))
			}
			warned := strings.Contains(logs.String(), "GPU_I_PROFILE is not the profile")
			if warned == tc.taken {
				t.Errorf("warned %v, want %v; log:\n%s", warned, !tc.taken, logs.String())
			}
			for _, want := range []string{"url=" + srv.URL, "uuid=" + uuidC, "gpu_instance=1", "page_profile=" + tc.page, "profile=" + tc.host} {
				if !tc.taken && !strings.Contains(logs.String(), want) {
					t.Errorf("warning without %s: %s", want, logs.String())
				}
			}
		})
	}
}

// The page's GPU_I_PROFILE is read with the instance's fields, that of
// its first line, bounded.
func TestParseProfile(t *testing.T) {
	long := strings.Repeat("x", 200)
	page := fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q,GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"1\"} 0.5\n", uuidC) +
		fmt.Sprintf("DCGM_FI_PROF_DRAM_ACTIVE{UUID=%q,GPU_I_PROFILE=\"4g.71gb\",GPU_I_ID=\"1\"} 0.5\n", uuidC) +
		fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q,GPU_I_PROFILE=%q,GPU_I_ID=\"2\"} 0.5\n", uuidC, long) +
		fmt.Sprintf("DCGM_FI_PROF_SM_ACTIVE{UUID=%q,GPU_I_PROFILE=\"7g.141gb\"} 0.5\n", uuidA)
	f, _, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if p := f[Key{UUID: uuidC, GI: 1}].Profile; p != "3g.71gb" {
		t.Errorf("instance 1: profile %q, want its first line's", p)
	}
	if p := f[Key{UUID: uuidC, GI: 2}].Profile; len(p) > 2*maxQuoted {
		t.Errorf("instance 2: profile of %d bytes, want it cut", len(p))
	}
	if p := f[Key{UUID: uuidA, GI: -1}].Profile; p != "" {
		t.Errorf("whole GPU: profile %q, want none", p)
	}
}
