package sim

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestEventsBounded: a scenario of more events than maxEvents is refused
// before it is decoded, naming the file, the line of the first event past
// the limit and the limit (a 4 MiB file of events took about 370 MB to
// load); one of maxEvents loads.
func TestEventsBounded(t *testing.T) {
	const head = "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\nevents:\n"
	for _, c := range []struct {
		name string
		n    int
		want string
	}{
		{"at the limit", maxEvents, ""},
		{"past the limit", maxEvents + 1, fmt.Sprintf("x.yaml:%d: a scenario has at most %d events, this one %d", 7+maxEvents, maxEvents, maxEvents+1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString(head)
			for i := range c.n {
				fmt.Fprintf(&b, "  - {at: %dms, tenant: a, rate: 5}\n", i)
			}
			sc, err := ParseScenario("x.yaml", []byte(b.String()))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%d events: %v, want them to load", c.n, err)
			case c.want == "" && len(sc.Events) != c.n:
				t.Errorf("%d events loaded, want %d", len(sc.Events), c.n)
			case c.want != "" && (err == nil || err.Error() != c.want):
				t.Errorf("%d events: %v, want %q", c.n, err, c.want)
			}
		})
	}
}

// TestOversizeRefusedBeforeDecoding: a scenario whose list is over its
// bound, or whose tree is over maxNodes, is refused on the tree the file
// was parsed to, before decoding builds it again: in all its parse and
// refusal allocate less than half as much again as the tree itself (they
// took more than twice as much: a 4 MiB file of events about 370 MB, one
// with a long list in the place of a string 880 MB).
func TestOversizeRefusedBeforeDecoding(t *testing.T) {
	const size = 1 << 20
	fill := func(head, item, tail string) []byte {
		var b strings.Builder
		b.WriteString(head)
		for b.Len() < size {
			b.WriteString(item)
		}
		b.WriteString(tail)
		return []byte(b.String())
	}
	const gpu = "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\n"
	for _, c := range []struct {
		name, want string
		src        []byte
	}{
		{"events", "a scenario has at most 10000 events", fill(gpu+"events:\n", "  - {at: 1s, tenant: a, rate: 5}\n", "")},
		{"tenants", "a scenario has at most 1024 tenants", fill(gpu+"tenants:\n", "  - {name: a, workload: {type: dnn, flops: 1e9}}\n", "")},
		{"a list for a string", "a scenario has at most 500000 YAML nodes", fill(gpu+"description: [", "0,", "0]\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree := allocated(func() {
				var root yaml.Node
				if err := yaml.Unmarshal(c.src, &root); err != nil {
					t.Fatal(err)
				}
			})
			var err error
			all := allocated(func() { _, err = ParseScenario("x.yaml", c.src) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want %q", err, c.want)
			}
			if all > tree*3/2 {
				t.Errorf("refused after allocating %d MB, the tree %d MB: decoded before it was refused", all>>20, tree>>20)
			}
		})
	}
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
