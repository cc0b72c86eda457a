// Package scenarios holds the simulator's built-in scenarios (sim package
// format, docs/simulator.md), embedded so that the exporter can ship them,
// and finds them by name for both commands (List, Find). A built-in
// scenario is loaded straight from its library (Builtin's FS and Path), the
// files it names resolved there: nothing is written to disk.
package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

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

// TenantsSuffix ends the name of a scenario's companion tenants file:
// NAME.yaml goes with NAME.tenants.yaml beside it.
const TenantsSuffix = ".tenants.yaml"

// Library is one set of built-in scenarios: the NAME.yaml files directly
// in directory Dir of FS, companion tenants files excepted.
type Library struct {
	FS  fs.FS
	Dir string // slash-separated, "." for the top of FS
}

// Libraries returns the libraries of the built-in scenarios: the scenario
// library (FS) and its trace-replay scenarios (replay/ of Replay).
func Libraries() []Library {
	return []Library{{FS: FS, Dir: "."}, {FS: Replay, Dir: "replay"}}
}

// Builtin is a built-in scenario.
type Builtin struct {
	Name string // the file name without .yaml; unique over the libraries
	FS   fs.FS  // the file system of its library
	Path string // the scenario file in FS, e.g. replay/diurnal-shift.yaml
}

// TenantsPath returns the companion tenants file of the scenario in FS,
// or "" when it has none.
func (b Builtin) TenantsPath() string {
	p := strings.TrimSuffix(b.Path, ".yaml") + TenantsSuffix
	if fi, err := fs.Stat(b.FS, p); err != nil || fi.IsDir() {
		return ""
	}
	return p
}

// List returns the scenarios of libs (the built-in libraries when libs is
// empty) sorted by name. Two scenarios of the same name are an error,
// since only one of them could be chosen by name.
func List(libs ...Library) ([]Builtin, error) {
	if len(libs) == 0 {
		libs = Libraries()
	}
	var out []Builtin
	seen := map[string]string{}
	for _, lib := range libs {
		files, err := fs.Glob(lib.FS, path.Join(lib.Dir, "*.yaml"))
		if err != nil {
			return nil, fmt.Errorf("built-in scenarios in %s: %w", lib.Dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, TenantsSuffix) {
				continue
			}
			name := strings.TrimSuffix(path.Base(f), ".yaml")
			if other, dup := seen[name]; dup {
				return nil, fmt.Errorf("built-in scenarios %s and %s have the same name", other, f)
			}
			seen[name] = f
			out = append(out, Builtin{Name: name, FS: lib.FS, Path: f})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Names returns the names of the built-in scenarios, sorted.
func Names() ([]string, error) {
	bs, err := List()
	if err != nil {
		return nil, err
	}
	return names(bs), nil
}

func names(bs []Builtin) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

// UnknownError is Find's error for a name that no built-in scenario has.
type UnknownError struct {
	Name  string   // the name asked for
	Known []string // the names of the built-in scenarios, sorted
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("no built-in scenario %q (built-in: %s)", e.Name, strings.Join(e.Known, ", "))
}

// Find returns the scenario of libs (the built-in libraries when libs is
// empty) with the given name; a trailing .yaml is ignored. A name that no
// scenario has gives an *UnknownError listing the names there are.
func Find(name string, libs ...Library) (Builtin, error) {
	bs, err := List(libs...)
	if err != nil {
		return Builtin{}, err
	}
	want := strings.TrimSuffix(name, ".yaml")
	for _, b := range bs {
		if b.Name == want {
			return b, nil
		}
	}
	return Builtin{}, &UnknownError{Name: name, Known: names(bs)}
}

// Tenants returns the scenario's companion tenants file as it is named in
// its library (TenantsPath) and its content; "" and nil when it has none.
func (b Builtin) Tenants() (name string, data []byte, err error) {
	name = b.TenantsPath()
	if name == "" {
		return "", nil, nil
	}
	if data, err = fs.ReadFile(b.FS, name); err != nil {
		return "", nil, b.Explain(err)
	}
	return name, data, nil
}

// Explain returns err, an error about the scenario such as a failure to
// load it from its library (whose messages name the files as they are
// there), naming the built-in scenario.
func (b Builtin) Explain(err error) error {
	return fmt.Errorf("built-in scenario %s: %w", b.Name, err)
}
