package gpu

import (
	"context"
	"io"
)

// Source is a backend that reads a host's GPUs: NVML on a real host, the
// simulator, or DCGM fields from a running dcgm-exporter.
type Source interface {
	// Name is a short backend name ("nvml", "sim", "dcgm-exporter").
	Name() string
	// Sample takes one reading of the whole host. An error means nothing
	// could be read at all; a single GPU that fails is reported in its
	// Device (Up=false, Err) and the others are still returned.
	Sample(ctx context.Context) (*Readings, error)
	// Close releases the backend (NVML Shutdown, connections).
	Close() error
}

// AppMetricsSource is implemented by backends that also play the tenants'
// applications, as the simulator does: it writes, in the Prometheus text
// exposition format, what the application named app would serve on its own
// /metrics (for example vLLM's latency histograms). Package tenant reads it
// through the same parser as a real HTTP latency source ("sim://app").
type AppMetricsSource interface {
	AppMetrics(app string, w io.Writer) error
}
