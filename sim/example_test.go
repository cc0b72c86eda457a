package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

// A scenario runs in virtual time: an hour takes seconds.
func Example() {
	sc, err := sim.ParseScenario("example.yaml", []byte(`
name: example
gpus:
  - model: H100-SXM5-80GB
    sharing: time-slice
tenants:
  - name: a
    workload: {type: training, flops: 2e12, bytes: 1e9}
  - name: b
    workload: {type: training, flops: 2e12, bytes: 1e9}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := sim.New(sc, sim.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	s.AdvanceTo(s.Now().Add(time.Minute))
	r, _ := s.Sample(context.Background())
	fmt.Println(len(r.Devices[0].Processes), "processes")
	for _, tw := range s.Window().Tenants {
		fmt.Printf("%s: %.2f of the SMs\n", tw.Tenant, tw.SMShare)
	}
	// Output:
	// 2 processes
	// a: 0.46 of the SMs
	// b: 0.46 of the SMs
}
