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
