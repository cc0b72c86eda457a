package yamlconf

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// TestParseSize holds the spellings both the tenants file and the scenario
// file accept: the unit's B may be left out ("4M"), and a number may have
// an exponent ("1e9").
func TestParseSize(t *testing.T) {
	tests := map[string]Size{
		// the tenants file
		"4MiB": 4 << 20, "512KiB": 512 << 10, "1MB": 1e6, "2048": 2048, "1GiB": 1 << 30, "1.5KiB": 1536,
		"4M": 4e6, "4Mi": 4 << 20, "2K": 2000,
		// the scenario file
		"40GiB": 40 << 30, "71GB": 71e9, "512MiB": 512 << 20, "1073741824": 1 << 30, "1e9": 1e9, "2.5e3B": 2500, "1TiB": 1 << 40,
		" 8 GiB ": 8 << 30, "7B": 7,
	}
	for in, want := range tests {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "4 MiBs", "4iB", "1PB", "1e400", "9e18GiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): no error", in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := map[string]time.Duration{"250ms": 250 * time.Millisecond, "1m30s": 90 * time.Second, "1d": 24 * time.Hour, "2w": 14 * 24 * time.Hour, "-1s": -time.Second, "0s": 0}
	for in, want := range tests {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "five", "25xs", "1"} {
		if _, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), "bad duration") {
			t.Errorf("ParseDuration(%q): %v, want a bad duration error", in, err)
		}
	}
}

func TestErrors(t *testing.T) {
	e := &Errors{File: "f.yaml", Max: 3}
	if e.Err() != nil {
		t.Fatal("empty list is an error")
	}
	e.Addf(0, "no line")
	e.Addf(2, "two")
	e.Addf(2, "two") // listed once
	var inner Errors
	inner.Addf(4, "inner %d", 4)
	inner.Addf(5, "inner %d", 5)
	e.Add(&inner)
	e.Add(errors.New("yaml: line 9: syntax"))
	want := "f.yaml:1: no line\nf.yaml:2: two\nf.yaml:4: inner 4\nf.yaml:5: further problems from here on not listed"
	if got := e.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if e.Problems() != 6 || !e.Full() {
		t.Errorf("problems %d full %v", e.Problems(), e.Full())
	}
	if got := inner.Error(); got != "line 4: inner 4\nline 5: inner 5" {
		t.Errorf("inner list %q", got)
	}
}

// TestErrorsClipped: a problem that quotes a long key or value is listed
// cut to MaxMessageBytes, at a character's start (a file of 50 bad
// durations of 80 KB each had an error of 4 MB).
func TestErrorsClipped(t *testing.T) {
	long := strings.Repeat("é", 1<<16)
	e := &Errors{File: "f.yaml", Max: 100}
	e.Addf(3, "bad duration %q", long)
	e.Addf(4, "short")
	got := e.Error()
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || lines[1] != "f.yaml:4: short" || !strings.HasPrefix(lines[0], `f.yaml:3: bad duration "éé`) ||
		!strings.HasSuffix(lines[0], fmt.Sprintf("... (%d more bytes)", len(fmt.Sprintf("bad duration %q", long))-MaxMessageBytes)) || len(lines[0]) > MaxMessageBytes+64 || !utf8.ValidString(got) {
		t.Errorf("got %d bytes:\n%.200s...%s", len(got), got, got[max(0, len(got)-100):])
	}
}

func TestAddSplitsLines(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("yaml: line 3: did not find expected key"), "x:3: did not find expected key"},
		{errors.New("yaml: control characters are not allowed"), "x:1: control characters are not allowed"},
		{&yaml.TypeError{Errors: []string{"line 2: field bogus not found in type t", "line 5: cannot unmarshal !!str `a` into int"}},
			"x:2: unknown key \"bogus\"\nx:5: `a` is a string, where an integer is wanted"},
		{fmt.Errorf("open x: no such file"), "x:1: open x: no such file"},
	}
	for _, tc := range tests {
		e := &Errors{File: "x"}
		e.Add(tc.err)
		if got := e.Error(); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.err, got, tc.want)
		}
	}
}

type point struct {
	X    int               `yaml:"x"`
	Name string            `yaml:"name"`
	F    float64           `yaml:"f"`
	On   bool              `yaml:"on"`
	D    time.Duration     `yaml:"d"`
	Sz   Size              `yaml:"size"`
	Tags map[string]string `yaml:"tags"`
	List []int             `yaml:"list"`
	Ptr  *int              `yaml:"ptr"`
	Sub  *sub              `yaml:"sub"`
	Skip int               `yaml:"-"`
}

type sub struct {
	A string `yaml:"a"`
}

func (s *sub) UnmarshalYAML(n *yaml.Node) error {
	var errs Errors
	errs.Fields(n, "sub", "sub.", s)
	if s.A == "" {
		errs.Addf(n.Line, "sub needs a")
	}
	return errs.Err()
}

func TestFields(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // one problem a line, in order
	}{
		{"all good", "x: 16\nname: n\nf: 1.5\non: true\nd: 1d\nsize: 4M\ntags: {a: b}\nlist: [1, 2]\nptr: 3\nsub: {a: z}\n", nil},
		{"unknown and repeated keys", "x: 1\nx: 2\ny: 3\nSkip: 1\n<<: {x: 1}\n", []string{
			`t:2: key "x" given twice in a point`,
			`t:3: unknown key "y" in a point (known: d, f, list, name, on, ptr, size, sub, tags, x)`,
			`t:4: unknown key "Skip" in a point`,
			`t:5: merge keys (<<) are not supported in a point`}},
		{"wrong kinds", "x: one\nname: [a]\nf: .nan\non: maybe\nd: soon\nsize: lots\ntags: [a]\nlist: {a: 1}\nptr: p\n", []string{
			`t:1: x must be an integer, got "one"`,
			`t:2: name must be a string`,
			`t:3: f must be a number, got ".nan"`,
			`t:4: on must be true or false, got "maybe"`,
			`t:5: d: bad duration "soon"`,
			`t:6: size: bad size "lots"`,
			`t:7: tags must be a mapping of names to values`,
			`t:8: list must be a list`,
			`t:9: ptr must be an integer, got "p"`}},
		{"map values", "tags: {a: [1], b: c, b: d}\n", []string{`t:1: tags: value of "a" must be a string`, `t:1: key "b" given twice in tags`}},
		{"nested problems keep their lines", "sub:\n  b: 1\nlist: [1, x]\n", []string{`t:2: unknown key "b" in sub (known: a)`, `t:2: sub needs a`, `t:3: list must be an integer, got "x"`}},
		{"not a mapping", "[1]\n", []string{"t:1: a point must be a mapping"}},
		{"integer out of range", "x: 4294967296\n", []string{`t:1: x: 4294967296 is out of range, where an integer from -2147483648 to 2147483647 is wanted`}},
		{"negative integer out of range", "x: -99999999999\n", []string{`t:1: x: -99999999999 is out of range, where an integer from -2147483648 to 2147483647 is wanted`}},
		{"integer in range", "x: -2147483648\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tc.in), &n); err != nil {
				t.Fatal(err)
			}
			errs := &Errors{File: "t"}
			var p point
			errs.Fields(n.Content[0], "a point", "", &p)
			var got []string
			if errs.Err() != nil {
				got = strings.Split(errs.Error(), "\n")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %d: got %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
	var n yaml.Node
	_ = yaml.Unmarshal([]byte("x: 16\nname: n\nf: 1.5\non: true\nd: 1d\nsize: 4M\ntags: {a: b}\nlist: [1, 2]\nptr: 3\nsub: {a: z}\n"), &n)
	var p point
	var errs Errors
	got := errs.Fields(n.Content[0], "a point", "", &p)
	if p.X != 16 || p.Name != "n" || p.F != 1.5 || !p.On || p.D != 24*time.Hour || p.Sz != 4e6 || p.Tags["a"] != "b" || len(p.List) != 2 || *p.Ptr != 3 || p.Sub.A != "z" {
		t.Errorf("decoded %+v", p)
	}
	if f := got["d"]; !f.OK || f.Line != 5 {
		t.Errorf("field d: %+v", f)
	}
	if _, given := got["missing"]; given {
		t.Error("a key not in the mapping is given")
	}
}

// TestFieldsIntegers: an integer field takes a plain decimal integer
// only. A quoted one is a string; one with a leading 0 is octal to a YAML
// 1.1 reader and decimal to others (a UID written "01750" read as 1000
// selected another user's processes); another base and digits grouped by
// _ are refused as well, each at its line, naming the field.
func TestFieldsIntegers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int    // with no problem
		prob string // the problem, "" for none
	}{
		{"1750", 1750, ""},
		{"-12", -12, ""},
		{"+7", 7, ""},
		{"0", 0, ""},
		{"-0", 0, ""},
		{"!!int 1000", 1000, ""},
		{`"01750"`, 0, `t:2: x must be an integer, got the string "01750": write the number without quotes`},
		{`'1000'`, 0, `t:2: x must be an integer, got the string "1000": write the number without quotes`},
		{"!!str 1000", 0, `t:2: x must be an integer, got the string "1000": write the number without quotes`},
		{"|\n  1000", 0, `t:2: x must be an integer, got the string "1000\n": write the number without quotes`},
		{"01750", 0, "t:2: x: 01750 has a leading 0, which is ambiguous (octal to some YAML readers: 010 is 8 to them, 10 to others); write the number without it"},
		{"010", 0, "t:2: x: 010 has a leading 0, which is ambiguous"},
		{"-010", 0, "t:2: x: -010 has a leading 0, which is ambiguous"},
		{"09", 0, "t:2: x: 09 has a leading 0, which is ambiguous"},
		{"00", 0, "t:2: x: 00 has a leading 0, which is ambiguous"},
		{"0x10", 0, `t:2: x must be a decimal integer, got "0x10" (0x, 0o, 0b and _ are not read)`},
		{"0o17", 0, `t:2: x must be a decimal integer, got "0o17"`},
		{"0b1", 0, `t:2: x must be a decimal integer, got "0b1"`},
		{"1_000", 0, `t:2: x must be a decimal integer, got "1_000"`},
		{"0x7fffffffffffffffff", 0, `t:2: x must be a decimal integer, got "0x7fffffffffffffffff"`},
		{"1e3", 0, `t:2: x must be an integer, got "1e3"`},
		{"2147483648", 0, "t:2: x: 2147483648 is out of range"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte("name: n\nx: "+tc.in+"\n"), &n); err != nil {
				t.Fatal(err)
			}
			errs := &Errors{File: "t"}
			var p point
			errs.Fields(n.Content[0], "a point", "", &p)
			got := ""
			if err := errs.Err(); err != nil {
				got = err.Error()
			}
			switch {
			case tc.prob == "" && (got != "" || p.X != tc.want):
				t.Errorf("x = %d, problems %q; want %d and none", p.X, got, tc.want)
			case tc.prob != "" && (!strings.HasPrefix(got, tc.prob) || strings.Contains(got, "\n")):
				t.Errorf("problems %q; want one, %q", got, tc.prob)
			}
		})
	}
}

// TestKeys: the checks made after decoding put a problem at the key it is
// about: the line of the key, also where its value is a block below it,
// and whether its value decoded.
func TestKeys(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("x: 1\nsub:\n  a: z\nd: soon\n"), &n); err != nil {
		t.Fatal(err)
	}
	var errs Errors
	var p point
	got := errs.Fields(n.Content[0], "a point", "", &p)
	if got["sub"].KeyLine != 2 || got["sub"].Line != 3 {
		t.Errorf("sub: key at line %d, value at %d; want 2 and 3", got["sub"].KeyLine, got["sub"].Line)
	}
	keys := got.Keys()
	if keys.Line("sub", 9) != 2 || keys.Line("d", 9) != 4 || keys.Line("name", 9) != 9 {
		t.Errorf("lines of sub, d, name: %d %d %d; want 2 4 9", keys.Line("sub", 9), keys.Line("d", 9), keys.Line("name", 9))
	}
	if !keys.Failed("d") || keys.Failed("x") || keys.Failed("name") {
		t.Errorf("failed d %v x %v name %v; want true false false", keys.Failed("d"), keys.Failed("x"), keys.Failed("name"))
	}
	if Given(nil).Keys() != nil || (Given{}).Keys() == nil {
		t.Error("Keys of no mapping is not nil, or that of an empty one is")
	}
}

func TestParse(t *testing.T) {
	bomb := "a: &a [x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b, *b]\n"
	tests := []struct {
		name, in string
		empty    bool
		want     string // "" = no problem
	}{
		{"empty", "", true, ""},
		{"comment only", "# nothing\n", true, ""},
		{"syntax", "a: [x\n", true, "f:1: did not find expected ',' or ']'"},
		{"two documents", "a: 1\n---\nb: 2\n", true, "f:2: only one YAML document is allowed"},
		// a document end ("...") with lines after it: the decoder dropped
		// them, the file read as its first document
		{"key after document end", "a: 1\n...\nb: 2\n", true, "f:3: only one YAML document is allowed: this line follows the document end (\"...\") above"},
		{"item after document end", "a:\n  - 1\n# c\n...\n\n# d\n  - 2\n", true, "f:7: only one YAML document is allowed: this line follows"},
		{"garbage after document end", "a: 1\n...\ngarbage: [\n", true, "f:3: only one YAML document is allowed: this line follows"},
		{"second document does not parse", "a: 1\n---\nb: [\n", true, "f:3: only one YAML document is allowed, and the second does not parse: did not find expected node content"},
		{"document end last", "a: 1\n...\n# end\n\n", false, ""},
		// an empty document last (a "---" followed by comments only):
		// nothing in it to drop
		{"document start last", "a: 1\n---\n", false, ""},
		{"document start and comments last", "a: 1\n---\n# end\n\n", false, ""},
		{"document start with a comment last", "---\na: 1\n--- # end\n", false, ""},
		{"empty document ended last", "a: 1\n---\n...\n", false, ""},
		{"key after an empty document", "a: 1\n---\n# c\n---\nb: 2\n", true, "f:4: only one YAML document is allowed"},
		{"key after an empty document's end", "a: 1\n---\n...\nb: 2\n", true, "f:4: only one YAML document is allowed: this line follows the document end"},
		{"null document last", "a: 1\n---\n~\n", true, "f:2: only one YAML document is allowed"},
		// yaml.v3 reads no other version, and names no line
		{"YAML 1.2 directive", "%YAML 1.2\n---\na: 1\n", false, "f:1: found incompatible YAML document (%YAML 1.2): only YAML 1.1 directives (%YAML 1.1) are read; the %YAML line can be deleted"},
		{"YAML 2.0 directive after a comment", "# t\n%YAML 2.0\n---\na: 1\n", false, "f:2: found incompatible YAML document (%YAML 2.0): only YAML 1.1"},
		{"YAML 1.1 directive", "%YAML 1.1\n---\na: 1\n", false, ""},
		{"an item's key indented wrong", "tenants:\n  - name: chat\n    selectors:\n      - executable: vllm\n   class: latency\n", false, "f:5: did not find expected '-' indicator (this line's indentation matches no block above it)"},
		{"a key indented wrong", "a:\n  b: 1\n  c:\n    d: 2\n # note\n e: 3\n", false, "f:6: did not find expected key"},
		{"aliases within budget", "a: &a [x]\nb: *a\n", false, ""},
		{"alias bomb", bomb, false, "f:2: more than 10 alias references (*a)"},
		{"alias cycle", "x: &a [*a]\n", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := &Errors{File: "f"}
			root := Parse(errs, []byte(tc.in), 10, 0)
			if (root == nil) != tc.empty {
				t.Errorf("root %v, want empty %v", root, tc.empty)
			}
			if tc.want == "" {
				if err := errs.Err(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := errs.Err(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParseAliasedNodes: past maxNodes nodes repeated through aliases,
// Parse reports the alias at which they passed it and returns no root:
// nothing of the file is decoded. (Parse bounded the references alone: a
// few to a big subtree were all kept, and a decoder repeated it each
// time.)
func TestParseAliasedNodes(t *testing.T) {
	in := "a: &a [x, y, z]\nb: [*a, *a]\nc: *a\n" // (4 nodes an alias)
	for _, tc := range []struct {
		name     string
		maxNodes int
		want     string // "" = no problem, the root returned
	}{
		{"no bound", 0, ""},
		{"within", 12, ""},
		{"past at the second", 5, "f:2: alias references (*a) repeat more than 5 nodes"},
		{"past at the last", 11, "f:3: alias references (*a) repeat more than 11 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := &Errors{File: "f"}
			root := Parse(errs, []byte(in), 10, tc.maxNodes)
			if err := errs.Err(); (tc.want == "") != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
			if (root != nil) != (tc.want == "") {
				t.Errorf("root %v, want one only within the bound", root)
			}
		})
	}
}

// OneDocument refuses what Parse refuses after the first document, at
// its line, and leaves a syntax error of the first to the reader.
func TestOneDocument(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a: 1\n---\nb: 2\n", "line 2: only one YAML document is allowed"},
		{"a: 1\n...\n# c\nb: 2\n", "line 4: only one YAML document is allowed: this line follows the document end"},
		{"a: 1\n---\nb: [\n", "line 3: only one YAML document is allowed, and the second does not parse"},
		{"---\na: 1\n...\n# end\n", ""},
		{"a: 1\n---\n", ""},
		{"---\na: 1\n---\n# end\n", ""},
		{"a: 1\n---\n---\nb: 2\n", "line 3: only one YAML document is allowed"},
		{"", ""},
		{"a: [\n---\nb: 2\n", ""},
	} {
		err := OneDocument([]byte(tc.in))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("OneDocument(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	var root yaml.Node
	_ = yaml.Unmarshal([]byte("a: 1\nb:\n  - x\n  - c: 2\n    d: 3\n"), &root)
	for _, tc := range []struct {
		path []any
		want int
	}{
		{nil, 1}, {[]any{"b"}, 2}, {[]any{"b", 1}, 4}, {[]any{"b", 1, "d"}, 5}, {[]any{"b", 1, "e"}, 4}, {[]any{"b", 7}, 2}, {[]any{"z"}, 1},
	} {
		if got := Line(&root, tc.path...); got != tc.want {
			t.Errorf("Line(%v) = %d, want %d", tc.path, got, tc.want)
		}
	}
}

func TestHas(t *testing.T) {
	var root yaml.Node
	_ = yaml.Unmarshal([]byte("a: 0\nb:\n  - x\n  - c:\n    d: 3\n"), &root)
	for _, tc := range []struct {
		path []any
		want bool
	}{
		{nil, true}, {[]any{"a"}, true}, {[]any{"b", 1, "c"}, true}, {[]any{"b", 1, "d"}, true},
		{[]any{"b", 1, "e"}, false}, {[]any{"b", 7}, false}, {[]any{"z"}, false}, {[]any{"a", "x"}, false},
	} {
		if got := Has(&root, tc.path...); got != tc.want {
			t.Errorf("Has(%v) = %v, want %v", tc.path, got, tc.want)
		}
	}
	if Has(nil, "a") {
		t.Error("Has on no document")
	}
}

func TestSizeUnmarshalYAML(t *testing.T) {
	var v struct {
		A Size `yaml:"a"`
		B Size `yaml:"b"`
		C Size `yaml:"c"`
	}
	err := yaml.Unmarshal([]byte("a: 40GiB\nb: lots\nc: [1]\n"), &v)
	want := &Errors{File: "s"}
	want.Add(err)
	if v.A != 40<<30 || want.Error() != "s:2: bad byte size \"lots\" (want e.g. 40GiB, 71GB, 1073741824)\ns:3: want a byte size" {
		t.Errorf("a %d, err %v", v.A, want)
	}
}

// TestDurationUnmarshalYAML: the scenario file's durations take the
// spellings of ParseDuration, and each bad one is listed with its line.
func TestDurationUnmarshalYAML(t *testing.T) {
	var v struct {
		A Duration `yaml:"a"`
		B Duration `yaml:"b"`
		C Duration `yaml:"c"`
		D Duration `yaml:"d"`
	}
	err := yaml.Unmarshal([]byte("a: 250ms\nb: 1d\nc: soon\nd: [1]\n"), &v)
	want := &Errors{File: "s"}
	want.Add(err)
	if v.A.String() != "250ms" || v.B != Duration(24*time.Hour) || v.B.Seconds() != 86400 ||
		want.Error() != "s:3: bad duration \"soon\" (use e.g. 250ms, 2s, 5m)\ns:4: want a duration" {
		t.Errorf("a %v, b %v, err %v", v.A, v.B, want)
	}
}

// TestPlainTypeError: yaml.v3's type errors in the file's terms, without
// Go type names; other messages as they are.
func TestPlainTypeError(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"field pidd not found in type sim.ProcessSpec", `unknown key "pidd"`},
		{"cannot unmarshal !!str `lots` into float64", "`lots` is a string, where a number is wanted"},
		{"cannot unmarshal !!str `x` into int64", "`x` is a string, where an integer is wanted"},
		{"cannot unmarshal !!int `3` into []sim.GPUSpec", "`3` is an integer, where a list is wanted"},
		{"cannot unmarshal !!seq into sim.fileScenario", "a list here, where a mapping of keys is wanted"},
		{"cannot unmarshal !!str `y` into bool", "`y` is a string, where true or false is wanted"},
		{"cannot unmarshal !!map into string", "a mapping here, where a string is wanted"},
		{"cannot unmarshal !!int `-5` into uint32", "`-5` is out of range, where an integer from 0 to 4294967295 is wanted"},
		{"cannot unmarshal !!int `-1` into uint64", "`-1` is out of range, where an integer from 0 to 18446744073709551615 is wanted"},
		{"cannot unmarshal !!int `300` into uint8", "`300` is out of range, where an integer from 0 to 255 is wanted"},
		{"cannot unmarshal !!int `99999999999` into int32", "`99999999999` is out of range, where an integer from -2147483648 to 2147483647 is wanted"},
		{"cannot unmarshal !!int `99999999999999999999` into int", "`99999999999999999999` is out of range, where an integer from -9223372036854775808 to 9223372036854775807 is wanted"},
		{"cannot unmarshal !!int `-5` into *uint16", "`-5` is out of range, where an integer from 0 to 65535 is wanted"},
		{"cannot unmarshal !!float `1e30` into int64", "`1e30` is out of range, where an integer from -9223372036854775808 to 9223372036854775807 is wanted"},
		{"cannot unmarshal !!float `9999999...` into int", "`9999999...` is out of range, where an integer from -9223372036854775808 to 9223372036854775807 is wanted"},
		{"cannot unmarshal !!float `.inf` into uint32", "`.inf` is out of range, where an integer from 0 to 4294967295 is wanted"},
		{"cannot unmarshal !!float `.nan` into int64", "`.nan` is not a number, where an integer is wanted"},
		{"something else", "something else"},
	} {
		if got := plainTypeError(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLimitAliases: LimitAliases names the line of the alias past either
// budget, references or the nodes they repeat, and stops there; an alias
// cycle is followed once.
func TestLimitAliases(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"within budget", "a: &a [x, y]\nb: *a\nc: *a\n", ""},
		{"references", "a: &a [x]\nb: [*a, *a, *a]\nc: [*a, *a]\n", "f:3: more than 4 alias references (*a); the file repeats itself too much"},
		{"nodes", "a: &a [w, x, y, z]\nb: *a\nc: *a\n", "f:3: alias references (*a) repeat more than 8 nodes; the file repeats itself too much"},
		{"cycle", "x: &a [*a]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(tc.in), &root); err != nil {
				t.Fatal(err)
			}
			errs := &Errors{File: "f"}
			LimitAliases(errs, &root, 4, 8)
			err := errs.Err()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
