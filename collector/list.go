package collector

import "github.com/prometheus/client_golang/prometheus"

// List is several collectors as one.
type List []prometheus.Collector

// Describe sends every collector's descriptions.
func (cs List) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

// Collect sends every collector's metrics.
func (cs List) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
