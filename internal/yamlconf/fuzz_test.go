package yamlconf

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Whatever a file holds, Parse lists each problem at a line of the file
// (one past its last where the file ends mid-document), returns no root
// for a file with a syntax error left unrepaired, and reports a file with
// problems as having them.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"../../tenant/testdata/*.yaml", "../../scenarios/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil && len(b) <= 64<<10 {
				f.Add(b)
			}
		}
	}
	for _, s := range []string{
		"", "# nothing\n", "a: [x\n", "a: 1\n---\nb: 2\n", "a: 1\n...\nb: 2\n", "a: 1\n...\n\n  - x\n", "a: 1\n---\nb: [\n",
		"tenants:\n  - name: chat\n    selectors:\n      - executable: vllm\n   class: latency\n",
		"a:\n  b: 1\n  c:\n    d: 2\n # note\n e: 3\n",
		"a: &a [x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b, *b]\n", "x: &a [*a]\n",
		"a:\n\tb: 1\n", "a: {b: [1,\n  c: 2\n", "a: 'x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		errs := &Errors{File: "f"}
		root := Parse(errs, data, 10, 0)
		last := bytes.Count(data, []byte("\n")) + 1
		for _, l := range errs.Lines() {
			if l < 1 || l > last+1 {
				t.Fatalf("%q: a problem at line %d of %d: %v", data, l, last, errs)
			}
		}
		if (errs.Problems() == 0) != (len(errs.Lines()) == 0) {
			t.Fatalf("%q: %d problems, %d listed (no Max)", data, errs.Problems(), len(errs.Lines()))
		}
		if err := errs.Err(); err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(l, "f:") {
					t.Fatalf("%q: problem %q names no place", data, l)
				}
			}
		}
		if root != nil {
			_ = Line(root, "tenants", 0, "name")
		}
	})
}

// A size read is below 2^63 bytes, a whole number of bytes reads back as
// itself, a Prometheus or Go duration read is one that those read, and
// an error quotes what it was given.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{
		"4MiB", "512KiB", "1MB", "2048", "1GiB", "1.5KiB", "4M", "4Mi", "2K", "40GiB", "71GB", "1e9", "2.5e3B",
		"1TiB", " 8 GiB ", "7B", "", "x", "-1", "4 MiBs", "4iB", "1PB", "1e400", "9e18GiB",
		"250ms", "1m30s", "1d", "2w", "-1s", "0s", "five", "1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseSize(s); err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseSize(%q): error %q does not quote it", s, err)
			}
		} else {
			if v >= 1<<63 {
				t.Fatalf("ParseSize(%q) = %d", s, v)
			}
			if back, err := ParseSize(strconv.FormatUint(uint64(v), 10)); (err != nil || back != v) && v < 1<<53 {
				t.Fatalf("ParseSize(%q) = %d, which reads back as %d, %v", s, v, back, err)
			}
		}
		d, err := ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseDuration(%q): error %q does not quote it", s, err)
			}
			return
		}
		if back, err := ParseDuration(d.String()); err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v, which reads back as %v, %v", s, d, back, err)
		}
	})
}
