package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-jsonnet/formatter"
)

// TestJsonnetFormatted holds every jsonnet source of the mixin to
// jsonnetfmt's default style (go-jsonnet's formatter, the library the
// build evaluates with), so that a diff shows a change, not a re-indent.
func TestJsonnetFormatted(t *testing.T) {
	files := repoFiles(t, false, "*.libsonnet", "*.jsonnet")
	if len(files) < 5 {
		t.Fatalf("only %d jsonnet files found: %q", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := formatter.Format(f, string(b), formatter.DefaultOptions())
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if got != string(b) {
			t.Errorf("%s is not formatted as jsonnetfmt's default style: format it with go-jsonnet's jsonnetfmt -i", f)
		}
	}
}
