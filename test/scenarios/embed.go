// Package scenarios holds the simulator's built-in scenarios (sim package
// format, docs/simulator.md), embedded so that the exporter can ship them.
package scenarios

import "embed"

// FS holds every *.yaml file of this directory: scenarios and their
// companion tenants files (NAME.tenants.yaml).
//
//go:embed *.yaml
var FS embed.FS
