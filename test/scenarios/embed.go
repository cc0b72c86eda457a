// Package scenarios holds the simulator's built-in scenarios (sim package
// format, docs/simulator.md), embedded so that the exporter can ship them.
package scenarios

import "embed"

// FS holds every *.yaml file of this directory: scenarios and their
// companion tenants files (NAME.tenants.yaml).
//
//go:embed *.yaml
var FS embed.FS

// Replay holds the trace-replay scenarios under replay/ with their
// companion tenants files, the trace they replay and its attribution
// (replay/README.md). It is a separate file system so that a binary that
// only uses FS does not carry the trace.
//
//go:embed replay/*.yaml replay/*.csv replay/README.md
var Replay embed.FS
