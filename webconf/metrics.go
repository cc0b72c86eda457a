package webconf

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	lastOKDesc = prometheus.NewDesc("vgpu_web_config_last_reload_successful",
		"1 if the last reload of --web.config.file succeeded (or none was tried since start), 0 if it failed: the last good web configuration stays in use, or, where exporter-toolkit reads the file itself (outside Linux, memfd_create refused: the start warns of it), the invalid edit is in use.", nil, nil)
	reloadsDesc = prometheus.NewDesc("vgpu_web_config_reloads_total",
		"Reloads of --web.config.file since the exporter started (SIGHUP, POST /-/reload, or a change found by its check every 5 s), failed ones included; the check's retries of a failure of the system's (not the file's) counted once for each distinct error.", nil, nil)
	failuresDesc = prometheus.NewDesc("vgpu_web_config_reload_failures_total",
		"Reloads of --web.config.file that failed since the exporter started.", nil, nil)
	expiryDesc = prometheus.NewDesc("vgpu_web_config_certificate_expiry_timestamp_seconds",
		"Unix time at which a certificate of the web configuration in use expires (its NotAfter): certificate=\"server\" the one served, certificate=\"client_ca\" the earliest of the client CA's. Absent without TLS. A refused renewal leaves the old certificate, and its expiry, in use; where exporter-toolkit reads the files itself (memfd_create refused, outside Linux), it reads the renewal all the same, and this is of the files as the last valid reload read them.", []string{"certificate"}, nil)
)

// Collector serves the reloads of the file and their outcome.
func (k *Kept) Collector() prometheus.Collector { return collector{k} }

type collector struct{ k *Kept }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastOKDesc
	ch <- reloadsDesc
	ch <- failuresDesc
	ch <- expiryDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ok := 1.0
	if c.k.lastFailed.Load() {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(lastOKDesc, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(c.k.reloads.Load()))
	ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(c.k.failures.Load()))
	if e := c.k.expiry.Load(); e != nil {
		for _, t := range []struct {
			label string
			at    time.Time
		}{{"server", e.server}, {"client_ca", e.clientCA}} {
			if !t.at.IsZero() {
				ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(t.at.Unix()), t.label)
			}
		}
	}
}
