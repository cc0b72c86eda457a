package helmtest

import (
	"strings"
	"testing"
)

// valuesCase is a row of a table of values: the rendering must fail with
// an error saying want, or, want empty, render manifests that decode.
type valuesCase struct {
	vals map[string]any
	want string // a part of the error; empty: rendered and decoded
}

// checkCases renders each case as the release vgpu-exporter in namespace;
// then, where not nil, checks each rendering that decoded.
func checkCases(t *testing.T, cases []valuesCase, then func(tc valuesCase, m *manifests)) {
	t.Helper()
	checkCasesAs(t, release{"vgpu-exporter", namespace}, cases, then)
}

// checkCasesAs is checkCases for the release r.
func checkCasesAs(t *testing.T, r release, cases []valuesCase, then func(tc valuesCase, m *manifests)) {
	t.Helper()
	c := loadChart(t)
	for _, tc := range cases {
		rendered, err := renderRelease(c, tc.vals, capabilities(true), r.name, r.ns)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("release %s in %s, values %v: error %v, want one saying %q", r.name, r.ns, tc.vals, err, tc.want)
			}
			continue
		}
		var m *manifests
		if err == nil {
			m, err = decode(rendered)
		}
		if err != nil {
			t.Errorf("release %s in %s, values %v: %v", r.name, r.ns, tc.vals, err)
			continue
		}
		if then != nil {
			then(tc, m)
		}
	}
}
