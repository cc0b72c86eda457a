package simrun

import (
	"fmt"
	"io"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

// WriteRestarts prints what the run's client restarts cost: how many went
// through a standby and how many started cold, the requests (training:
// steps) they lost and the time their tenants were paused.
func WriteRestarts(w io.Writer, acts []sim.Action) {
	var standby, cold, lost int
	var paused time.Duration
	for _, a := range acts {
		switch a.Kind {
		case "restart-standby":
			standby++
		case "restart-drain", "restart":
			cold++
		default:
			continue
		}
		lost += a.Lost
		paused += a.Paused
	}
	if standby+cold == 0 {
		return
	}
	fmt.Fprintf(w, "client restarts: %d through a standby, %d cold; %d requests (training: steps) lost, %v paused\n",
		standby, cold, lost, paused.Round(time.Millisecond))
}
