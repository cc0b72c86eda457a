package oracle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/simrun"
)

// An interrupt (the context's end) stops the search within a minute of
// virtual time of each replay, not at the end of the phase it replays: a
// search of two hours of eight-gpu-hot took more than a minute of wall
// time to end after Ctrl-C.
func TestFindInterrupted(t *testing.T) {
	sc, _, err := simrun.LoadScenario("eight-gpu-hot")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = Find(ctx, sc, nil, 1, 2*time.Hour, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("ended %v after the start, the interrupt 200ms after it; want within seconds", took.Round(time.Millisecond))
	}
}
