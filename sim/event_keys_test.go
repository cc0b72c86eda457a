package sim

import (
	"strings"
	"testing"
)

// TestEventKeysRead: an event that would not do what it says is refused
// at its line. Before, an event naming a tenant without rate: or action:
// silently set the tenant's arrival rate to 0, and a rate or code given to
// an event that reads none (a stop with a rate) was dropped.
func TestEventKeysRead(t *testing.T) {
	scenario := func(event string) string {
		return "name: x\ngpus: [{model: H100-SXM5-80GB}]\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 5}}}\nevents:\n  - " + event + "\n"
	}
	for _, c := range []struct {
		name, event, want string // want "" when it loads
	}{
		{"a rate", "{at: 10s, tenant: a, rate: 20}", ""},
		{"a rate of 0, said", "{at: 10s, tenant: a, rate: 0}", ""},
		{"a rate event, said", "{at: 10s, tenant: a, action: rate, rate: 0}", ""},
		{"a stop", "{at: 10s, tenant: a, action: stop}", ""},
		{"an xid", "{at: 10s, action: xid, gpu: 0, code: 13, tenant: a}", ""},
		{"a rising counter", "{at: 10s, action: pcie-replays, gpu: 0, rate: 0.5}", ""},
		{"a tenant and nothing else", "{at: 10s, tenant: a}",
			"x.yaml:6: a rate event needs rate: the tenant's requests a second from then on (0 stops its arrivals); or an action"},
		{"a rate event without its rate", "{at: 10s, tenant: a, action: rate}", "x.yaml:6: a rate event needs rate:"},
		{"a stop with a rate", "{at: 10s, tenant: a, action: stop, rate: 5}", "x.yaml:6: an event of action stop has no rate"},
		{"a start with a code", "{at: 10s, tenant: a, action: start, code: 13}", "x.yaml:6: an event of action start has no code"},
		{"a rate with a code", "{at: 10s, tenant: a, rate: 5, code: 13}", "x.yaml:6: an event of action rate has no code"},
		{"a lost GPU with a rate", "{at: 10s, action: gpu-lost, gpu: 0, rate: 1}", "x.yaml:6: an event of action gpu-lost has no rate"},
		{"an xid with a rate", "{at: 10s, action: xid, gpu: 0, code: 13, rate: 1}", "x.yaml:6: an event of action xid has no rate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("x.yaml", []byte(scenario(c.event)))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
