package tenant

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzGlob: the native matcher agrees with the regexp globs were matched
// by before, on every glob and name (valid UTF-8 without a newline, which
// the regexp's '.' does not match), and its prefix, suffix and inner
// shortcuts never turn a match away.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"vm-[0-3]", "vm-1"}, {"*[!/]", "q/"}, {"[a-]b-]", "-b-"}, {"a*b]c", "ab]c"}, {"x[", "x["},
		{"*-worker-?", "llm-worker-1"}, {"/kubepods*pod1234*", "/kubepods/pod1234/x"}, {"[]]", "]"}, {"é*[é]", "éé"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, g, s string) {
		if g == "" || len(g) > 64 || len(s) > 64 || !utf8.ValidString(g) || !utf8.ValidString(s) || strings.ContainsAny(g+s, "\n") {
			return
		}
		if got, want := compileGlob(g).match(s), refGlobRegexp(g).MatchString(s); got != want {
			t.Fatalf("glob %q on %q = %v, the regexp %v", g, s, got, want)
		}
	})
}
