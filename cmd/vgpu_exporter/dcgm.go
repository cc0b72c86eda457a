package main

import (
	"errors"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// wrapDCGM wraps inner with the dcgm-exporter source when
// --backend.dcgm-exporter.url is set.
func wrapDCGM(cfg *config, inner gpu.Source, logger log.Logger) (gpu.Source, error) {
	if cfg.DCGMExporterURL == "" {
		return inner, nil
	}
	inner.Close()
	return nil, errors.New("--backend.dcgm-exporter.url: the dcgm-exporter source is not in this build")
}
