package helmtest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
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

// containerResourceName is the API server's verdict on the name of a
// container's resource (k8s.io/kubernetes' validateContainerResourceName,
// with the page size its hugepages value check parses), from apimachinery's
// validators: cpu, memory, ephemeral-storage, hugepages-SIZE (a positive
// whole number of bytes) or a qualified DOMAIN/NAME, native (a
// kubernetes.io domain) or extended (with "requests." before it still a
// qualified name, and not beginning with it).
func containerResourceName(s string) []string {
	if errs := validation.IsQualifiedName(s); len(errs) > 0 {
		return errs
	}
	if !strings.Contains(s, "/") {
		switch {
		case s == "cpu" || s == "memory" || s == "ephemeral-storage":
			return nil
		case strings.HasPrefix(s, "hugepages-"):
			size, err := resource.ParseQuantity(strings.TrimPrefix(s, "hugepages-"))
			if err != nil || size.Sign() <= 0 || size.MilliValue()%1000 != 0 {
				return []string{"a page size of no whole number of bytes"}
			}
			return nil
		}
		return []string{"must be a standard resource for containers"}
	}
	if strings.Contains(s, "kubernetes.io/") {
		return nil
	}
	if strings.HasPrefix(s, "requests.") {
		return []string{"doesn't follow extended resource name standard"}
	}
	return validation.IsQualifiedName("requests." + s)
}

// TestResourceNamesAsTheAPIServer: a resource of resources' limits or
// requests is taken where the API server takes its name and refused
// where it refuses it; before, any name rendered (gpu, CPU, a domain of
// 250 characters) and failed at the API server.
func TestResourceNamesAsTheAPIServer(t *testing.T) {
	limit := func(s string) map[string]any {
		return map[string]any{"resources": map[string]any{"limits": map[string]any{s: "1Gi"}}}
	}
	checkNames(t, []nameField{{"resources.limits", limit, containerResourceName}}, []string{
		"cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "hugepages-1Gi", "hugepages-2048Ki", "hugepages-1G",
		"hugepages-0", "hugepages-", "hugepages-x", "hugepages-1.5", "CPU", "gpu", "pods", "storage", "",
		"nvidia.com/gpu", "nvidia.com/gpu.shared", "example.com/a_b", "kubernetes.io/x", "nvidia.com/-gpu", "Nvidia.com/gpu",
		"requests.example.com/x", "a/b/c", "/gpu", "nvidia.com/", "x/" + strings.Repeat("n", 64),
		strings.Repeat("p", 244) + "/x", strings.Repeat("p", 245) + "/x", strings.Repeat("p", 254) + "/x"})
	checkCases(t, []valuesCase{
		{map[string]any{"resources": map[string]any{"requests": map[string]any{"gpu": 1}}}, "at '/resources/requests': additional properties 'gpu' not allowed"},
		{map[string]any{"tenants": map[string]any{"reloader": map[string]any{"resources": map[string]any{"limits": map[string]any{"CPU": 1}}}}},
			"at '/tenants/reloader/resources/limits': additional properties 'CPU' not allowed"},
	}, nil)
}
