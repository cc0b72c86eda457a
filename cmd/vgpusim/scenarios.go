package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/sim"
	"github.com/vgpu-exporter/vgpu_exporter/test/scenarios"
)

const tenantsSuffix = ".tenants.yaml"

// libraries are the embedded scenario libraries and the directory in each
// that holds scenarios: the library itself and its trace-replay scenarios.
var libraries = []struct {
	fsys fs.FS
	dir  string
}{{scenarios.FS, "."}, {scenarios.Replay, "replay"}}

// builtin is a built-in scenario: its name, the file system it is in and
// its path there.
type builtin struct {
	name string
	fsys fs.FS
	path string
}

// builtins returns the built-in scenarios sorted by name. A scenario is
// named by its file name without .yaml, wherever it lies in the library.
func builtins() ([]builtin, error) {
	var out []builtin
	seen := map[string]string{}
	for _, lib := range libraries {
		files, err := fs.Glob(lib.fsys, path.Join(lib.dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, tenantsSuffix) {
				continue
			}
			name := strings.TrimSuffix(path.Base(f), ".yaml")
			if other, dup := seen[name]; dup {
				return nil, fmt.Errorf("built-in scenarios %s and %s have the same name", other, f)
			}
			seen[name] = f
			out = append(out, builtin{name: name, fsys: lib.fsys, path: f})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// builtinNames returns the names of the built-in scenarios, sorted.
func builtinNames() ([]string, error) {
	bs, err := builtins()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.name
	}
	return names, nil
}

// loadScenario loads a scenario file, or else the built-in scenario of that
// name. A built-in is copied with the other embedded files into a
// temporary directory first, so that it finds its companion tenants file
// and any trace it names as a file would. It returns the scenario, the
// path it was loaded from and a cleanup function.
func loadScenario(arg string) (*sim.Scenario, string, func(), error) {
	nop := func() {}
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		sc, err := sim.LoadScenario(arg)
		return sc, arg, nop, err
	}
	name := strings.TrimSuffix(arg, ".yaml")
	bs, err := builtins()
	if err != nil {
		return nil, "", nop, err
	}
	var found *builtin
	names := make([]string, len(bs))
	for i := range bs {
		names[i] = bs[i].name
		if bs[i].name == name {
			found = &bs[i]
		}
	}
	if found == nil {
		return nil, "", nop, fmt.Errorf("scenario %q: no such file and no built-in scenario of that name (built-in: %s)", arg, strings.Join(names, ", "))
	}
	dir, err := os.MkdirTemp("", "vgpusim-")
	if err != nil {
		return nil, "", nop, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if err := os.CopyFS(dir, found.fsys); err != nil {
		cleanup()
		return nil, "", nop, fmt.Errorf("built-in scenarios: %w", err)
	}
	p := filepath.Join(dir, filepath.FromSlash(found.path))
	sc, err := sim.LoadScenario(p)
	if err != nil {
		cleanup()
		// Name the built-in, not the temporary copy.
		return nil, "", nop, fmt.Errorf("built-in scenario %s: %s", name, strings.ReplaceAll(err.Error(), p, found.path))
	}
	return sc, p, cleanup, nil
}

// scenarioHead is what `list` shows of a scenario file.
type scenarioHead struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Duration    string      `yaml:"duration"`
	GPUs        []yaml.Node `yaml:"gpus"`
	Tenants     []yaml.Node `yaml:"tenants"`
}

// listScenarios prints the built-in scenarios.
func listScenarios(w io.Writer) error {
	bs, err := builtins()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGPUS\tTENANTS\tDURATION\tTENANTS FILE\tDESCRIPTION")
	for _, b := range bs {
		data, err := fs.ReadFile(b.fsys, b.path)
		if err != nil {
			return err
		}
		var h scenarioHead
		if err := yaml.Unmarshal(data, &h); err != nil {
			return fmt.Errorf("built-in scenario %s: %w", b.path, err)
		}
		companion := "-"
		if c := strings.TrimSuffix(b.path, ".yaml") + tenantsSuffix; fileInFS(b.fsys, c) {
			companion = c
		}
		if h.Duration == "" {
			h.Duration = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", b.name, len(h.GPUs), len(h.Tenants), h.Duration, companion, h.Description)
	}
	return tw.Flush()
}

func fileInFS(fsys fs.FS, name string) bool {
	_, err := fs.Stat(fsys, name)
	return err == nil
}
