package tenant

import (
	"testing"
	"time"
)

// TestLatencySourceKeyUnambiguous: two different latency sources never
// share a key, whatever their fields hold; else a reload from one to the
// other keeps the tracker, which goes on reading with the old matchers.
func TestLatencySourceKeyUnambiguous(t *testing.T) {
	base := LatencySource{URL: "http://10.0.0.5:8000/metrics", Preset: "vllm-e2e", Timeout: time.Second, MaxBytes: 1 << 20}
	with := func(f func(*LatencySource)) *LatencySource {
		l := base
		f(&l)
		return &l
	}
	for _, tc := range []struct {
		name string
		a, b *LatencySource
	}{
		{"a separator in a matcher's value",
			with(func(l *LatencySource) { l.Matchers = map[string]string{"model_name": "x|version=2"} }),
			with(func(l *LatencySource) { l.Matchers = map[string]string{"model_name": "x", "version": "2"} })},
		{"an equals sign in a matcher's name",
			with(func(l *LatencySource) { l.Matchers = map[string]string{"a=b": "c"} }),
			with(func(l *LatencySource) { l.Matchers = map[string]string{"a": "b=c"} })},
		{"a separator in the URL",
			with(func(l *LatencySource) { l.URL, l.Preset = "http://h/m|vllm-e2e", "" }),
			with(func(l *LatencySource) { l.URL, l.Preset = "http://h/m", "vllm-e2e|" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ka, kb := tc.a.key(), tc.b.key(); ka == kb {
				t.Errorf("one key %q for %+v and %+v", ka, *tc.a, *tc.b)
			}
		})
	}
	same := with(func(l *LatencySource) { l.Matchers = map[string]string{"model_name": "x", "version": "2"} })
	again := with(func(l *LatencySource) { l.Matchers = map[string]string{"version": "2", "model_name": "x"} })
	if same.key() != again.key() {
		t.Errorf("the same source, two keys: %q, %q", same.key(), again.key())
	}
}
