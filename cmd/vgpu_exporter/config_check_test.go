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
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, []byte("defaults: {scrape_interval: 10s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 5<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file       string
		allowEmpty bool
		code       int
		out, errs  []string
	}{
		{good, false, 0, []string{good + ": OK (2 tenants)"}, nil},
		{bad, false, 1, nil, []string{bad + ":3:", bad + ":10:", "INVALID"}},
		{filepath.Join(dir, "missing.yaml"), false, 1, nil, []string{"missing.yaml", "no such file"}},
		{empty, false, 1, nil, []string{empty + " defines no tenants", "--tenants.allow-empty", "INVALID"}},
		{empty, true, 0, []string{empty + ": OK (0 tenants)"}, nil},
		{big, false, 1, nil, []string{big + " is larger than the limit of 4194304 bytes"}},
		{"/dev/zero", false, 1, nil, []string{"/dev/zero is not a regular file (a character device)"}},
	} {
		var stdout, stderr strings.Builder
		code := checkConfig(tc.file, tc.allowEmpty, &stdout, &stderr)
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
