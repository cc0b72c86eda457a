package tenant

import (
	"regexp"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		glob, s string
		want    bool
	}{
		{"chat-*", "chat-7f9c", true},
		{"chat-*", "search-1", false},
		{"/kubepods.slice/*pod1234_5678*", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/cri-containerd-ab.scope", true},
		{"vm-?", "vm-1", true},
		{"vm-?", "vm-12", false},
		{"vm-[0-3]", "vm-2", true},
		{"vm-[!0-3]", "vm-2", false},
		{"a.b", "axb", false},
		{"python*", "python3.11", true},
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYYcd", false},
		{"a*b*c", "abcabc", true},
		{"*pod*_*", "/kubepods-pod1_2.slice", true},
		{"?", "é", true},
		{"??", "é", false},
		{"x?z", "xéz", true},
		{"é*", "éa", true},
		{"abc", "ab", false},
		{"ab", "abc", false},
		{"*a", "bbb", false},
	}
	for _, tc := range tests {
		if got := globMatch(compileGlob(tc.glob), tc.s); got != tc.want {
			t.Errorf("glob %q on %q = %v, want %v", tc.glob, tc.s, got, tc.want)
		}
	}
}

// refGlobRegexp is how globs with classes were matched before: as a
// regexp. The native matcher must agree with it on every class it
// accepted.
func refGlobRegexp(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" {
				b.WriteString(regexp.QuoteMeta(g[i : i+2+j]))
			} else {
				b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			}
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return regexp.MustCompile("^" + regexp.QuoteMeta(g) + "$")
	}
	return re
}

// TestGlobClassesAsBefore: classes are matched natively as the regexp
// they were compiled to matched them.
func TestGlobClassesAsBefore(t *testing.T) {
	globs := []string{"vm-[0-3]", "vm-[!0-3]", "[^a]x", "[a-]", "[-a]", "[]", "[!]", "[^]", "[", "a[", "[z-a]x", "x*[z-a]",
		"[a-c-e]", "[αβ-δ]", "*[0-9]?", "x[]y", "[!a-z]*", `[a\b]`, "[[a]", "a]b", "[a]]", "[!^]", "[^!]", "[!!]", "[é]?",
		"*[ab]*[ab]", "?[[]", "[a-a]", "[*?]", "*[!/]", "[0-9][0-9]", "[]]", "[!]]", "[a-]b-]",
		"[[:digit:]]", "[![:alpha:]]", "x[[:foo:]]", "[a[:digit:]]", "[![:]", "[[:]", "[[::]"}
	subjects := []string{"", "a", "b", "c", "-", "x", "ax", "bx", "vm-1", "vm-7", "[]", "[!]", "[^]", "[", "a[", "[z-a]x", "xy[z-a]",
		"d", "f", "γ", "ε", "β", `\`, "]", "[a]", "^", "!", "a]b", "0x", "9ab", "x]y", "xy", "é", "éz", "ée", "ab", "aXb", "/",
		"q/", "qa", "77", "7a", "*", "?", "[a", "]]", "a-b-", "-b-", "ab-", "a-", "b]", "[[:digit:]]", "7]", ":]", "[]", "x[[:foo:]]", ":"}
	for _, g := range globs {
		re := refGlobRegexp(g)
		for _, s := range subjects {
			if got, want := globMatch(compileGlob(g), s), re.MatchString(s); got != want {
				t.Errorf("glob %q on %q = %v, the regexp %v", g, s, got, want)
			}
		}
	}
}

// TestGlobMemoryBounded: a glob costs its text; a long one with classes
// compiled to a regexp of about 40 bytes per byte of pattern, kept for as
// long as the configuration was in use, and allocated about 150 per byte
// to build it (a 4 MiB one: 970 MB resident).
func TestGlobMemoryBounded(t *testing.T) {
	if g := compileGlob("[" + strings.Repeat("a", maxClassBytes) + "]x"); g.classProblem("k") != "" {
		t.Errorf("the longest class is refused: %s", g.classProblem("k"))
	}
	for _, g := range []string{strings.Repeat("[ab]", 1<<16), "[a]" + strings.Repeat("a", 1<<18), strings.Repeat("[", 1<<18), strings.Repeat("*[", 1<<17)} {
		var gl *glob
		if alloc := testutil.Allocated(func() { gl = compileGlob(g) }); alloc > 64<<10 {
			t.Errorf("compiling a glob of %d bytes (%.10q...) allocated %d bytes", len(g), g, alloc)
		}
		s := strings.Repeat("ab", 8)
		if n := testing.AllocsPerRun(10, func() { gl.match(s) }); n > 0 {
			t.Errorf("matching %.10q... allocated %v times", g, n)
		}
	}
}
