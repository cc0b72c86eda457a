package collector

import (
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

func init() {
	registerCollector("exporter", true, newExporterCollector)
}

// exporterCollector reports the exporter's own health: the sampler, the
// tenants file and the kubelet pod-resources mapping.
type exporterCollector struct {
	descSet
	sampleDuration, samples, sampleErrors, consecutiveErrors, lastSample, backend *prometheus.Desc
	sampleInterval, publishDuration, duplicatesDropped                            *prometheus.Desc
	reloadOK, reloadTime, reloads, reloadFailures                                 *prometheus.Desc
	kubeletUp, kubeletErrors, kubeletLastSuccess, podsMapped                      *prometheus.Desc
	metadataUp, metadataErrors, metadataLastSuccess                               *prometheus.Desc
	dcgmUp, dcgmErrors, dcgmPageAge, dcgmMatched                                  *prometheus.Desc
}

func newExporterCollector(log.Logger) (Collector, error) {
	c := &exporterCollector{}
	c.sampleDuration = c.add("sample_duration_seconds", "Wall time the last sample of the backend took.")
	c.publishDuration = c.add("sample_publish_duration_seconds", "Wall time the last sample's publication took, besides the backend's call: building its snapshot and rendering the /metrics encodings (after a failed sample, its figures').")
	c.duplicatesDropped = c.add("sample_duplicate_gpus_dropped_total", "Devices dropped from the samples for repeating a GPU (its UUID) listed before them in the same sample.")
	c.samples = c.add("samples_total", "Samples taken from the backend, failed ones included.")
	c.sampleInterval = c.add("sample_interval_seconds", "The interval the backend is sampled at (--sample.interval): one sample is asked for each.")
	c.sampleErrors = c.add("sample_errors_total", "Samples of the backend that failed.")
	c.consecutiveErrors = c.add("sample_consecutive_errors", "Samples that failed in a row since the last success.")
	c.lastSample = c.add("last_sample_timestamp_seconds", "When the last successful sample was taken (the sampler's clock).")
	c.backend = c.add("backend_info", "The backend the readings come from; always 1.", "backend")
	c.reloadOK = c.add("config_last_reload_successful", "1 if the last reload of the tenants file succeeded (or none was tried since start), 0 if it failed (the previous configuration stays in use).")
	c.reloadTime = c.add("config_last_reload_success_timestamp_seconds", "When the tenants file in use was loaded.")
	c.reloads = c.add("config_reloads_total", "Reloads of the tenants file since the exporter started, failed ones included.")
	c.reloadFailures = c.add("config_reload_failures_total", "Reloads of the tenants file that failed since the exporter started.")
	c.kubeletUp = c.add("kubelet_pod_resources_up", "1 if the last query of the kubelet pod-resources API succeeded, 0 if not.")
	c.kubeletErrors = c.add("kubelet_pod_resources_errors_total", "Failed queries of the kubelet pod-resources API.")
	c.kubeletLastSuccess = c.add("kubelet_pod_resources_last_success_timestamp_seconds", "When the pod mapping in use was fetched from the kubelet.")
	c.podsMapped = c.add("kubelet_pods_mapped", "Pods with GPUs in the mapping from the kubelet.")
	c.metadataUp = c.add("kubelet_pod_metadata_up", "1 if the last read of the pod metadata (--kubernetes.pod-metadata) succeeded, 0 if not (the last good metadata stays in use); absent before the first read.")
	c.metadataErrors = c.add("kubelet_pod_metadata_errors_total", "Failed reads of the pod metadata (--kubernetes.pod-metadata).")
	c.metadataLastSuccess = c.add("kubelet_pod_metadata_last_success_timestamp_seconds", "When the pod metadata in use was read.")
	c.dcgmUp = c.add("dcgm_exporter_up", "1 if the last scrape of dcgm-exporter (--backend.dcgm-exporter.url) succeeded, 0 if not.")
	c.dcgmErrors = c.add("dcgm_exporter_scrape_errors_total", "Failed scrapes of dcgm-exporter since the exporter started.")
	c.dcgmMatched = c.add("dcgm_exporter_gpus_matched", "GPUs of this host, up, that the last dcgm-exporter page merged had a current series for; 0 when the scrape failed. Below the GPUs up: the page is another host's, or lacks the fields read.")
	c.dcgmPageAge = c.add("dcgm_exporter_page_age_seconds", "Age at the last sample of the oldest timestamped series of the dcgm-exporter page merged; absent when its lines carry no timestamps (dcgm-exporter's own carry none).")
	return c, nil
}

func (c *exporterCollector) Update(snap *tenant.Snapshot, ch chan<- prometheus.Metric) error {
	e := c.emit(ch)
	defer e.close()
	s := snap.Sampler
	e.gauge(c.sampleDuration, s.LastDuration.Seconds())
	e.gauge(c.publishDuration, s.PublishDuration.Seconds())
	e.counter(c.duplicatesDropped, float64(s.DuplicatesDropped))
	e.counter(c.samples, float64(s.SamplesTotal))
	if s.Interval > 0 {
		e.gauge(c.sampleInterval, s.Interval.Seconds())
	}
	e.counter(c.sampleErrors, float64(s.ErrorsTotal))
	e.gauge(c.consecutiveErrors, float64(s.ConsecutiveErr))
	if !s.LastSuccess.IsZero() {
		e.gauge(c.lastSample, unixSeconds(s.LastSuccess))
	}
	if r := snap.Readings; r != nil && r.Backend != "" {
		e.gauge(c.backend, 1, r.Backend)
	}
	if r := snap.Readings; r != nil && r.DCGMExporter != nil {
		e.gauge(c.dcgmUp, boolValue(r.DCGMExporter.Up))
		e.counter(c.dcgmErrors, float64(r.DCGMExporter.ScrapeErrorsTotal))
		e.gauge(c.dcgmMatched, float64(r.DCGMExporter.GPUsMatched))
		if a := r.DCGMExporter.PageAgeSeconds; a != nil {
			e.gauge(c.dcgmPageAge, *a)
		}
	}

	cfg := snap.Config
	if cfg.File != "" {
		e.gauge(c.reloadOK, boolValue(cfg.LastReloadSuccessful))
		if !cfg.LastReloadSuccessTime.IsZero() {
			e.gauge(c.reloadTime, unixSeconds(cfg.LastReloadSuccessTime))
		}
	}
	// The reload counters are served from 0 even without a tenants file:
	// a reload asked for then fails, and the failure must be seen.
	e.counter(c.reloads, float64(cfg.ReloadsTotal))
	e.counter(c.reloadFailures, float64(cfg.ReloadFailuresTotal))

	if k := snap.Kubelet; k != nil {
		e.gauge(c.kubeletUp, boolValue(k.Up))
		e.counter(c.kubeletErrors, float64(k.ErrorsTotal))
		if !k.LastSuccess.IsZero() {
			e.gauge(c.kubeletLastSuccess, unixSeconds(k.LastSuccess))
		}
		e.gauge(c.podsMapped, float64(k.PodsMapped))
		if md := k.Metadata; md.Source != "" {
			// The metadata is read only after a good pod-resources
			// query: before its first read its up is absent, not 0, so
			// that a read never tried raises no alert.
			if md.ErrorsTotal > 0 || !md.LastSuccess.IsZero() {
				e.gauge(c.metadataUp, boolValue(md.Up))
			}
			e.counter(c.metadataErrors, float64(md.ErrorsTotal))
			if !md.LastSuccess.IsZero() {
				e.gauge(c.metadataLastSuccess, unixSeconds(md.LastSuccess))
			}
		}
	}
	return e.err()
}
