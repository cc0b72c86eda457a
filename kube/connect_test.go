package kube

import (
	"testing"
	"time"
)

// A failed connection to the kubelet is tried again after at most the
// refresh interval, jitter included, and the first retry is not later.
func TestConnectParams(t *testing.T) {
	for _, tc := range []struct{ refresh, timeout time.Duration }{
		{10 * time.Second, 5 * time.Second},
		{time.Second, time.Second},
		{200 * time.Millisecond, time.Second},
		{time.Hour, 5 * time.Second},
	} {
		p := connectParams(tc.refresh, tc.timeout)
		b := p.Backoff
		if longest := time.Duration(float64(b.MaxDelay) * (1 + b.Jitter)); longest > tc.refresh || b.MaxDelay <= 0 {
			t.Errorf("refresh %v: backoff up to %v (max delay %v, jitter %v), want at most the refresh interval", tc.refresh, longest, b.MaxDelay, b.Jitter)
		}
		if b.BaseDelay > b.MaxDelay || b.BaseDelay <= 0 || b.Multiplier <= 1 {
			t.Errorf("refresh %v: backoff %+v", tc.refresh, b)
		}
		if p.MinConnectTimeout != tc.timeout {
			t.Errorf("refresh %v: connect timeout %v, want the refresh's timeout %v", tc.refresh, p.MinConnectTimeout, tc.timeout)
		}
	}
}
