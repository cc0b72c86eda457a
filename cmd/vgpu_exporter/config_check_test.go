package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(`tenants:
  - name: chat
    class: latency
    selectors:
      - executable: vllm
  - name: batch
    class: batch
    selectors:
      - uid: 1002
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two problems on two lines: both must be printed.
	if err := os.WriteFile(bad, []byte(`tenants:
  - name: chat
    class: latncy
    selectors:
      - executable: vllm
  - name: batch
    class: batch
    selectors:
      - uid: 1002
    slo: {quantile: 0.99, target: 250xs}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file      string
		code      int
		out, errs []string
	}{
		{good, 0, []string{good + ": OK (2 tenants)"}, nil},
		{bad, 1, nil, []string{bad + ":3:", bad + ":10:", "INVALID"}},
		{filepath.Join(dir, "missing.yaml"), 1, nil, []string{"missing.yaml", "no such file"}},
	} {
		var stdout, stderr strings.Builder
		code := checkConfig(tc.file, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", tc.file, code, tc.code, stderr.String())
		}
		for _, w := range tc.out {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout %q lacks %q", tc.file, stdout.String(), w)
			}
		}
		for _, w := range tc.errs {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr %q lacks %q", tc.file, stderr.String(), w)
			}
		}
	}
}
