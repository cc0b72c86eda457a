// Package procmetrics serves the exporter's own process_* metrics with
// client_golang's names, help, types and values: client_golang's process
// collector outside Linux or where /proc cannot be read, and on Linux its
// own, since client_golang's rereads /proc/stat, /proc/self/limits and the
// namespace-wide /proc/self/net/netstat on every scrape.
package procmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// fallback is client_golang's process collector, used where New has no
// cheaper one.
func fallback() prometheus.Collector {
	return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
}
