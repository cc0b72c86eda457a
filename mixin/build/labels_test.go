package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// labelValueSinks returns where a dashboard could give a label value that a
// tenant chose (a tenant's, pod's or VM's name) more than text: a query
// variable neither multi-value nor "All" (Grafana escapes the regular
// expression characters of such variables' values only, and a "." of a
// name in a =~ matcher would match any character), a panel's or a field's
// links (a value in a URL), a text panel (markdown and HTML).
func labelValueSinks(d map[string]any) []string {
	var out []string
	if tpl, ok := d["templating"].(map[string]any); ok {
		list, _ := tpl["list"].([]any)
		for _, v := range list {
			v, _ := v.(map[string]any)
			if v["type"] == "query" && (v["multi"] != true || v["includeAll"] != true) {
				out = append(out, fmt.Sprintf("variable %v: not multi-value with All, its values not regex-escaped", v["name"]))
			}
		}
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "text" {
				out = append(out, path+": a text panel")
			}
			for _, k := range sortedNames(v) {
				if l, ok := v[k].([]any); ok && (k == "links" || k == "dataLinks") && len(l) > 0 && path != "" {
					out = append(out, fmt.Sprintf("%s.%s: links", path, k))
				}
				walk(path+"."+k, v[k])
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", d)
	return out
}

// No dashboard turns a label value into a regular expression unescaped, a
// URL or markup; the checker itself finds each of those.
func TestDashboardsLabelValuesStayText(t *testing.T) {
	for name, d := range dashboards(t) {
		if sinks := labelValueSinks(d); len(sinks) > 0 {
			t.Errorf("%s: %s", name, strings.Join(sinks, "; "))
		}
	}
	const hostile = `{"templating": {"list": [{"type": "query", "name": "tenant", "multi": false}]},
		"panels": [{"type": "text", "options": {"content": "${tenant}"}},
			{"type": "timeseries", "fieldConfig": {"defaults": {"links": [{"url": "https://x/?t=${__field.labels.tenant}"}]}}}]}`
	var d map[string]any
	if err := json.Unmarshal([]byte(hostile), &d); err != nil {
		t.Fatal(err)
	}
	if got := labelValueSinks(d); len(got) != 3 {
		t.Errorf("a dashboard with each sink: found %q, want 3", got)
	}
}
