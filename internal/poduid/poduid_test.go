package poduid

import (
	"regexp"
	"testing"
)

// TestValid: the API's form (dashes) and a static pod's 32 hex digits, in
// any case; nothing else.
func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5":    true,
		"0F2C3D4E-5A6B-4C7D-8E9F-A0B1C2D3E4F5":    true,
		"0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5":        true,
		"0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5":    false, // the systemd driver's, not the API's
		"0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f":     false,
		"0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5x":   false,
		"pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5": false,
		"g f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5":       false,
		"":                                        false,
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestStatic: a static pod's UID is the 32 hex digits of its manifest's
// hash; the API's form is not, nor anything Valid refuses.
func TestStatic(t *testing.T) {
	for s, want := range map[string]bool{
		"0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5":     true,
		"0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5": false,
		"0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4fg":     false,
		"0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f":      false,
		"":                                     false,
	} {
		if got := Static(s); got != want {
			t.Errorf("Static(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestInCgroup: the UID of a cgroupfs pod segment and of a systemd
// driver's pod slice, as written; none elsewhere in a segment.
func TestInCgroup(t *testing.T) {
	for seg, want := range map[string]string{
		"pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5":                          "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5",
		"kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice": "0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5",
		"pod0F2C3D4E5A6B4C7D8E9FA0B1C2D3E4F5":                              "0F2C3D4E5A6B4C7D8E9FA0B1C2D3E4F5",
		"pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5.scope":                    "",
		"pod0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5/x":                        "",
		"0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5":                             "",
		"pod0f2c3d4e-5a6b":                                                 "",
		"":                                                                 "",
	} {
		if got := InCgroup(seg); got != want {
			t.Errorf("InCgroup(%q) = %q, want %q", seg, got, want)
		}
	}
}

// FuzzInCgroup: the length and "pod" prefilter never hides a match of the
// whole expression, and what is found is a UID.
func FuzzInCgroup(f *testing.F) {
	f.Add("kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice")
	f.Add("pod0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5")
	whole := regexp.MustCompile(`pod(` + pattern("[-_]") + `)(?:\.slice)?$`)
	f.Fuzz(func(t *testing.T, seg string) {
		got := InCgroup(seg)
		var want string
		if m := whole.FindStringSubmatch(seg); m != nil {
			want = m[1]
		}
		if got != want {
			t.Fatalf("InCgroup(%q) = %q, want %q", seg, got, want)
		}
		if got != "" && len(got) != 32 && len(got) != 36 {
			t.Fatalf("InCgroup(%q) = %q: not a UID", seg, got)
		}
	})
}
