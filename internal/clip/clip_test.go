package clip

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"short", "nvidia-smi: ok", 64, "nvidia-smi: ok"},
		{"empty", "", 8, ""},
		{"quotes and unicode pass", `say "é" ü`, 64, `say "é" ü`},
		{"controls escaped", "a\nb\tc\x00", 64, `a\nb\tc\x00`},
		{"invalid bytes escaped", "a\xffb\xc3", 64, `a\xffb\xc3`},
		{"line separator escaped", "a\u2028b", 64, `a\u2028b`},
		{"a replacement character is a character", "bad \uFFFD char", 64, "bad \uFFFD char"},
		{"cut says what is left", "0123456789", 4, "0123... (6 more bytes)"},
		{"at the limit not cut", "0123", 4, "0123"},
		{"cut between runes", strings.Repeat("é", 10), 5, "ééé... (14 more bytes)"},
		{"an escape is not split", "ab\x01cd", 3, `ab\x01... (2 more bytes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.in, tc.limit); got != tc.want {
				t.Errorf("Text(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
			}
			if got := Bytes([]byte(tc.in), tc.limit); got != tc.want {
				t.Errorf("Bytes(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
			}
		})
	}
}

// FuzzText: whatever comes in, what goes out is valid UTF-8 with no
// control character, and bounded by the limit plus one escape and the
// suffix; printable text within the limit goes out as it came.
func FuzzText(f *testing.F) {
	f.Add("a\nb\xff", 3)
	f.Add("bad \uFFFD char", 64)
	f.Add(strings.Repeat("é", 100), 17)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = max(0, min(limit, 4096))
		got := Text(s, limit)
		if b := Bytes([]byte(s), limit); b != got {
			t.Fatalf("Bytes(%q, %d) = %q, Text %q", s, limit, b, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q, %d) = %q: invalid UTF-8", s, limit, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("Text(%q, %d) = %q: a control character", s, limit, got)
			}
		}
		printable := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsGraphic(r) })
		if printable && len(s) <= limit && got != s {
			t.Fatalf("Text(%q, %d) = %q: printable text within the limit changed", s, limit, got)
		}
		if len(got) > limit+10+len("... ( more bytes)")+20 {
			t.Fatalf("Text(%q, %d): %d bytes", s, limit, len(got))
		}
	})
}
