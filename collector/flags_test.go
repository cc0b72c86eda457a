package collector

import (
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// parseFlags parses args on kingpin.CommandLine and restores the defaults
// when the test ends.
func parseFlags(t *testing.T, args ...string) {
	t.Helper()
	reset := func() {
		regMu.Lock()
		for _, r := range registrations {
			r.forced = false
		}
		regMu.Unlock()
		if _, err := kingpin.CommandLine.Parse(nil); err != nil {
			t.Fatalf("reset flags: %v", err)
		}
	}
	reset()
	t.Cleanup(reset)
	if _, err := kingpin.CommandLine.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args        []string
		want        []string
		disabledErr string // a filter naming this collector fails
	}{
		{nil, builtin, ""},
		{[]string{"--no-collector.mig"}, []string{"exporter", "gpu", "tenant", "vgpu"}, "mig"},
		{[]string{"--collector.disable-defaults", "--collector.gpu", "--collector.tenant"}, []string{"gpu", "tenant"}, "vgpu"},
		{[]string{"--collector.disable-defaults", "--no-collector.gpu"}, nil, "gpu"},
		{[]string{"--collector.gpu"}, builtin, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			parseFlags(t, tc.args...)
			e, err := NewExporter(static(richSnapshot()), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Names(); !slices.Equal(got, tc.want) {
				t.Errorf("enabled collectors = %v, want %v", got, tc.want)
			}
			if tc.disabledErr != "" {
				_, err := NewExporter(static(richSnapshot()), nil, tc.disabledErr)
				if err == nil || !strings.Contains(err.Error(), "disabled") {
					t.Errorf("filter %q on a disabled collector: err = %v, want a 'disabled' error", tc.disabledErr, err)
				}
			}
		})
	}
}

func TestFlagsDeclared(t *testing.T) {
	for _, n := range append([]string{"disable-defaults"}, builtin...) {
		if kingpin.CommandLine.GetFlag("collector."+n) == nil {
			t.Errorf("flag --collector.%s not declared on kingpin.CommandLine", n)
		}
	}
}
