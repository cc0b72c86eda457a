package helmtest

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestQuantitiesAsTheAPIServer: the schema takes a resource quantity
// where the API server's parser does and refuses it where that refuses
// it; the nano and micro suffixes (500u, 1n) were refused as not
// matching, though the API server takes them. A request over its limit
// in those units still fails the rendering.
func TestQuantitiesAsTheAPIServer(t *testing.T) {
	c := loadChart(t)
	for _, q := range []string{"500u", "1n", "0.5u", "100m", "50m", "1", "1.5", ".5", "1k", "1M", "2G", "1E", "1Ki", "1.5Gi", "1e3", "1E3", "+1",
		"1K", "1mi", "1u5", "abc", "1.5.5", "1 m", "1e"} {
		_, perr := resource.ParseQuantity(q)
		_, err := render(c, map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": q}}})
		if (err == nil) != (perr == nil) {
			t.Errorf("resources.requests.cpu=%q: rendering error %v; the API server's parser: %v", q, err, perr)
		}
	}
	checkCases(t, []valuesCase{
		{map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "2m"}, "limits": map[string]any{"cpu": "1500u"}}},
			"resources.requests.cpu=2m is more than resources.limits.cpu=1500u"},
		{map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "1000000n"}, "limits": map[string]any{"cpu": "1m"}}}, ""},
	}, nil)
}
