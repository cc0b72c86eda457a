package simrun

import (
	"bytes"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
)

func TestWriteRestarts(t *testing.T) {
	for _, c := range []struct {
		name string
		acts []sim.Action
		want string
	}{
		{"none", []sim.Action{{Kind: "power_limit"}}, ""},
		{"both", []sim.Action{
			{Kind: "restart-standby", Lost: 12, Paused: 100 * time.Microsecond},
			{Kind: "restart-drain", Lost: 1, Paused: 18 * time.Second},
			{Kind: "restart", Lost: 40, Paused: 5 * time.Second},
			{Kind: "move", Lost: 7, Paused: time.Second},
		}, "client restarts: 1 through a standby, 2 cold; 53 requests (training: steps) lost, 23s paused\n"},
	} {
		var b bytes.Buffer
		WriteRestarts(&b, c.acts)
		if b.String() != c.want {
			t.Errorf("%s: %q, want %q", c.name, b.String(), c.want)
		}
	}
}
