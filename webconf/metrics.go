package webconf

import "github.com/prometheus/client_golang/prometheus"

var (
	lastOKDesc = prometheus.NewDesc("vgpu_web_config_last_reload_successful",
		"1 if the last reload of --web.config.file succeeded (or none was tried since start), 0 if it failed (the last good web configuration stays in use).", nil, nil)
	reloadsDesc = prometheus.NewDesc("vgpu_web_config_reloads_total",
		"Reloads of --web.config.file since the exporter started (SIGHUP, POST /-/reload, or a change found by its check every 5 s), failed ones included.", nil, nil)
	failuresDesc = prometheus.NewDesc("vgpu_web_config_reload_failures_total",
		"Reloads of --web.config.file that failed since the exporter started.", nil, nil)
)

// Collector serves the reloads of the file and their outcome.
func (k *Kept) Collector() prometheus.Collector { return collector{k} }

type collector struct{ k *Kept }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastOKDesc
	ch <- reloadsDesc
	ch <- failuresDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ok := 1.0
	if c.k.lastFailed.Load() {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(lastOKDesc, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(c.k.reloads.Load()))
	ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(c.k.failures.Load()))
}
