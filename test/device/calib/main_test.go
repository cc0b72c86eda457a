package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestFixture: the rows made from a fixture of calibrate.sh's output (no GPU
// was available when the script was written; this checks the format).
func TestFixture(t *testing.T) {
	f, err := os.Open("testdata/h200.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	if err := run(f, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| bandwidth knee: active-thread fraction reaching 95% of full bandwidth | 0.60 |",
		"| MPS: two bandwidth-bound clients, total over one alone | 0.67 |",
		"| MPS: two bandwidth-bound clients against time-slicing | 0.73 |",
		"| time slice long: each of two saturating tenants over default | 1.069 |",
		"| MPS client restart (context creation to first kernel, no model load) | 2.10 s |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadLine(t *testing.T) {
	for _, in := range []string{"bw_fraction_10\n", "a b c\n", "ok 1\nbad x\n"} {
		if _, err := parse(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: error %v, want one naming the line", in, err)
		}
	}
}
