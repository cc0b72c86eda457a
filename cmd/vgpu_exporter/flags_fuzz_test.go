package main

import (
	"strings"
	"testing"
)

// FuzzParseArgs: any command line either parses into a config that
// validates, or yields an error; nothing panics, and a config that
// validates keeps the invariants serve relies on.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		"",
		"--backend=sim\x00--sim.scenario=h200-mig\x00--sim.seed=7",
		"--sample.interval=250ms\x00--web.max-requests=0",
		"--web.telemetry-path=/gpu\x00--log.level=debug\x00--log.format=json",
		"--backend=nvml\x00--backend.dcgm-exporter.url=http://127.0.0.1:9400/metrics",
		"--kubernetes.pod-metadata=/tmp/pods.json",
		"--sample.interval=-1s",
		"--metering.currency=USD\x00--metering.price-per-gpu-hour=2.5\x00--metering.price-per-kwh=0.12",
		"--metering.price-per-kwh=NaN",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		c, err := parseArgs(t, args...)
		if err != nil {
			if err.Error() == "" {
				t.Errorf("%q: empty error", args)
			}
			return
		}
		if c.SampleInterval <= 0 || c.MaxRequests < 0 || !strings.HasPrefix(c.TelemetryPath, "/") || reserved(c.TelemetryPath) {
			t.Errorf("%q validated with interval %s, max requests %d, path %q", args, c.SampleInterval, c.MaxRequests, c.TelemetryPath)
		}
		if p, errs := c.Metering.prices(); errs != nil || (p != nil && p.Problems() != nil) {
			t.Errorf("%q validated with prices %v, problems %v", args, p, errs)
		}
	})
}
