package nvml

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A control call that waits for the backend while a sample holds it (a
// driver call that does not return) gives up when its context ends, with
// an error that names the call and the sample, wrapping the context's
// error and gpu.ErrBusy (nothing was asked of the GPU).
func TestControlGivesUpWaitingForASample(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(b *Backend, ctx context.Context, uuid string) error
	}{
		{"LockClocks", func(b *Backend, ctx context.Context, uuid string) error {
			return b.LockClocks(ctx, uuid, gpu.ClockLock{MinMHz: 1000, MaxMHz: 1500})
		}},
		{"SetPowerLimit", func(b *Backend, ctx context.Context, uuid string) error { return b.SetPowerLimit(ctx, uuid, 500) }},
		{"PowerLimitInForce", func(b *Backend, ctx context.Context, uuid string) error {
			_, err := b.PowerLimitInForce(ctx, uuid)
			return err
		}},
		{"SetVGPUScheduler", func(b *Backend, ctx context.Context, uuid string) error {
			return b.SetVGPUScheduler(ctx, uuid, gpu.VGPUSchedulerSetting{Policy: "equal-share"})
		}},
		{"ConfigureMIG", func(b *Backend, ctx context.Context, uuid string) error {
			return b.ConfigureMIG(ctx, uuid, []string{"7g.80gb"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, dgxh100.New())
				b := f.backend()
				hang := make(chan struct{})
				entered := make(chan struct{}, 1)
				t.Cleanup(func() { close(hang) })
				f.devs[3].GetPowerUsageFunc = func() (uint32, nvml.Return) {
					entered <- struct{}{}
					<-hang
					return 300000, nvml.SUCCESS
				}
				go func() { _, _ = b.Sample(context.Background()) }()
				<-entered
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				start := time.Now() // the bubble's clock
				ctl := make(chan error, 1)
				go func() { ctl <- tc.call(b, ctx, f.devs[0].UUID) }()
				var err error
				select {
				case err = <-ctl:
				case <-time.After(time.Minute):
					t.Fatalf("%s still waiting for the backend a minute after its context ended", tc.name)
				}
				if waited := time.Since(start); waited != 200*time.Millisecond {
					t.Errorf("returned after %v, want at its context's deadline, 200ms", waited)
				}
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, gpu.ErrBusy) {
					t.Errorf("error %v, want one wrapping the context's and gpu.ErrBusy", err)
				}
				for _, want := range []string{tc.name + " on GPU " + f.devs[0].UUID, "a sample holds"} {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("error %v does not say %q", err, want)
					}
				}
			})
		})
	}
}
