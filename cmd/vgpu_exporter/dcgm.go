package main

import (
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/dcgmexp"
)

// wrapDCGM wraps inner with the dcgm-exporter source when
// --backend.dcgm-exporter.url is set. On error inner is closed.
func wrapDCGM(cfg *config, inner gpu.Source, logger log.Logger) (gpu.Source, error) {
	if cfg.DCGMExporterURL == "" {
		return inner, nil
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
