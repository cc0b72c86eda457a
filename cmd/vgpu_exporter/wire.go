package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/collector"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// build opens the backend and the tenants configuration named by cfg and
// returns the service connecting them.
func build(cfg *config, logger log.Logger) (*service, error) {
	return nil, errors.New("no backend is available in this build")
}

// newCollector is the GPU/tenant collector.
func newCollector(snap func() *tenant.Snapshot, logger log.Logger, filters ...string) (prometheus.Collector, error) {
	return collector.NewExporter(snap, logger, filters...)
}

// checkConfig validates a tenants file and prints every error.
func checkConfig(path string, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: tenants files cannot be checked by this build\n", path)
	return 1
}
