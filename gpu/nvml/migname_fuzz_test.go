package nvml

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Whatever name the driver gives a GPU instance profile, the name served
// is "" (the one built from the index serves) or one of that many slices
// taken from what the driver gave, that a label can carry: UTF-8 without
// blanks or control characters.
func FuzzDriverProfileName(f *testing.F) {
	for _, p := range rtxProProfiles {
		f.Add([]byte("MIG "+p.want), uint8(p.slices))
	}
	f.Add([]byte("1g.24gb+me.all"), uint8(1))
	f.Add([]byte(" MIG  7g.80gb \x00junk"), uint8(7))
	f.Add([]byte("MIG 2g.48gb extra"), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, slices uint8) {
		var raw [96]int8
		for i := 0; i < len(raw) && i < len(b); i++ {
			raw[i] = int8(b[i])
		}
		name := driverProfileName(raw, uint32(slices))
		if name == "" {
			return
		}
		given, _, _ := strings.Cut(string(b[:min(len(b), len(raw))]), "\x00")
		if !strings.HasPrefix(name, fmt.Sprintf("%dg.", slices)) || !strings.Contains(given, name) {
			t.Fatalf("driverProfileName(%q, %d) = %q", given, slices, name)
		}
		if !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			t.Fatalf("driverProfileName(%q, %d) = %q: no label value", given, slices, name)
		}
	})
}

// The driver's name serves where it names a profile of the slices in
// printable ASCII; else "" (the name built from the index serves).
func TestDriverProfileName(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		slices uint32
		want   string
	}{
		{"MIG 1g.24gb+me.all", 1, "1g.24gb+me.all"},
		{" MIG 7g.80gb \x00junk", 7, "7g.80gb"},
		{"MIG 2g.48gb", 1, ""},
		{"MIG 2g.48gb extra", 2, ""},
		{"MIG 1g.\x8f", 1, ""},          // not UTF-8: no label value
		{"MIG 1g.24gb\x1b[2J", 1, ""},   // a control character
		{"MIG 1g.24gb\u00a0+me", 1, ""}, // a blank outside ASCII
	} {
		var raw [96]int8
		for i := 0; i < len(tc.raw); i++ {
			raw[i] = int8(tc.raw[i])
		}
		if got := driverProfileName(raw, tc.slices); got != tc.want {
			t.Errorf("driverProfileName(%q, %d) = %q, want %q", tc.raw, tc.slices, got, tc.want)
		}
	}
}
