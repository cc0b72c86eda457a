//go:build !linux

package main

import "github.com/prometheus/client_golang/prometheus"

// newProcessCollector returns client_golang's process collector outside
// Linux.
func newProcessCollector() prometheus.Collector { return fallbackProcessCollector() }
