package helmtest

import (
	"strings"
	"testing"
)

// TestRefusedBeforeTheAPIServer: values and release names the API server
// would refuse partway through an install (after some of the release's
// objects were created) fail the rendering with a message that says what
// to change; before, the rendering passed: a release named with a dot or
// beginning with a digit gave its Service a name that is not a DNS label,
// and imagePullSecrets given as names, not {name: NAME}, a pod spec that
// does not decode.
func TestRefusedBeforeTheAPIServer(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		r    release
		vals map[string]any
		want string // empty: rendered
	}{
		{release{"gpu.prod", "monitoring"}, nil, `the full name "gpu.prod-vgpu-exporter" (the release's name "gpu.prod"`},
		{release{"1gpu", "monitoring"}, nil, "beginning with a letter"},
		{release{"1gpu", "monitoring"}, map[string]any{"fullnameOverride": "gpu"}, ""},
		{release{"gpu", "monitoring"}, map[string]any{"fullnameOverride": "GPU"}, `the full name "GPU"`},
		{release{"gpu", "monitoring"}, map[string]any{"imagePullSecrets": []any{"regcred"}}, "imagePullSecrets"},
		{release{"gpu", "monitoring"}, map[string]any{"imagePullSecrets": []any{map[string]any{"name": "regcred"}}}, ""},
	} {
		rendered, err := renderRelease(c, tc.vals, capabilities(true), tc.r.name, tc.r.ns)
		if tc.want == "" {
			if err != nil {
				t.Errorf("release %s, values %v: %v", tc.r.name, tc.vals, err)
			} else if _, err := decode(rendered); err != nil {
				t.Errorf("release %s, values %v: %v", tc.r.name, tc.vals, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("release %s, values %v: error %v, want one saying %q", tc.r.name, tc.vals, err, tc.want)
		}
	}
}
