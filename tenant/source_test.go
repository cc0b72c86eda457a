package tenant

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one.yaml", "tenants: [{name: a, selectors: [{uid: 1}]}]\n")
	empty := write("empty.yaml", "tenants: []\n")
	for _, tc := range []struct {
		name       string
		src        ConfigSource
		allowEmpty bool
		str        string
		tenants    int
		err        string // "": no error
	}{
		{"nowhere", ConfigSource{}, false, "none (all usage is unassigned)", 0, ""},
		{"a file", ConfigSource{Path: one}, false, one, 1, ""},
		{"an empty file", ConfigSource{Path: empty}, false, empty, 0, "(start with --tenants.allow-empty if that is intended)"},
		{"an empty file allowed", ConfigSource{Path: empty}, true, empty, 0, ""},
		{"no such file", ConfigSource{Path: filepath.Join(dir, "absent.yaml")}, true, filepath.Join(dir, "absent.yaml"), 0, "absent.yaml"},
		{"built-in data", ConfigSource{Name: "x.tenants.yaml", Data: []byte("tenants: [{name: b, selectors: [{uid: 2}]}]\n")}, false, "built-in x.tenants.yaml", 1, ""},
		{"built-in data, empty", ConfigSource{Name: "y.tenants.yaml", Data: []byte("tenants: []\n")}, false, "built-in y.tenants.yaml", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.src.String(); got != tc.str {
				t.Errorf("String %q, want %q", got, tc.str)
			}
			cfg, err := tc.src.Load(tc.allowEmpty)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				if tc.src.Path == empty && !errors.Is(err, ErrNoTenants) {
					t.Errorf("error %v does not wrap ErrNoTenants", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Tenants) != tc.tenants {
				t.Errorf("%d tenants, want %d", len(cfg.Tenants), tc.tenants)
			}
		})
	}
}
