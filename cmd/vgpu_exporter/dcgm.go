package main

import (
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/dcgmexp"
)

// wrapDCGM wraps inner with the dcgm-exporter source when
// --backend.dcgm-exporter.url is set. On error inner is closed. A scrape
// timeout not below the sample interval is warned of: a dcgm-exporter that
// answers just within it delays every sample.
func wrapDCGM(cfg *config, inner gpu.Source, logger log.Logger) (gpu.Source, error) {
	if cfg.DCGMExporterURL == "" {
		return inner, nil
	}
	if cfg.DCGMTimeout >= cfg.SampleInterval {
		level.Warn(logger).Log("msg", "--backend.dcgm-exporter.timeout is not below --sample.interval: a dcgm-exporter answering slowly within the timeout delays every sample",
			"timeout", cfg.DCGMTimeout, "sample_interval", cfg.SampleInterval)
	}
	s, err := dcgmexp.New(inner, dcgmexp.Options{
		URL:     cfg.DCGMExporterURL,
		Timeout: cfg.DCGMTimeout,
		MaxAge:  cfg.DCGMMaxAge,
		Logger:  log.With(logger, "component", "dcgm-exporter"),
	})
	if err != nil {
		inner.Close()
		return nil, err
	}
	return s, nil
}
