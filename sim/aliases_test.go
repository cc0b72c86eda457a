package sim

import (
	"strings"
	"testing"
)

// TestScenarioAliasBudget: a scenario whose YAML aliases (*name) repeat
// too much is refused before it is decoded, the error naming the file and
// the alias's line, as the tenants file is; it was decoded first (a
// file of 3.8 MB took about 300 MB) and refused at line 1, naming
// nothing. Aliases within the budget still load.
func TestScenarioAliasBudget(t *testing.T) {
	const gpu = "gpus: [{model: H100-SXM5-80GB}]\n"
	const training = "{type: training, flops: 1e12}"
	// many references: each tenant a repeat of the first
	manyRefs := gpu + "tenants:\n  - &t {name: a, workload: " + training + "}\n" + strings.Repeat("  - *t\n", 1001)
	// few references to a big subtree: one GPU's MIG layout (about 6,000
	// nodes), repeated until the 17th repeat passes the budget
	migs := "[" + strings.Repeat("{profile: 1g.10gb}, ", 2000) + "{profile: 1g.10gb}]"
	bigSubtree := "gpus:\n  - &g {model: H100-SXM5-80GB, mig: " + migs + "}\n" + strings.Repeat("  - *g\n", 20) +
		"tenants: [{name: a, workload: " + training + "}]\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"references", manyRefs, "bomb.yaml:1004: more than 1000 alias references (*t); the file repeats itself too much"},
		{"nodes", bigSubtree, "bomb.yaml:19: alias references (*g) repeat more than 100000 nodes; the file repeats itself too much"},
		{"within budget", gpu + "tenants:\n  - {name: a, workload: &w " + training + "}\n  - {name: b, workload: *w}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ParseScenario("bomb.yaml", []byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "" && len(sc.Tenants) != 2:
				t.Fatalf("%d tenants, want 2", len(sc.Tenants))
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
