package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/vgpu-exporter/vgpu_exporter"

// layers lists, for every package of the module (by its path below the
// module root), the project packages its non-test files may import:
// cmd -> (pipeline, collector, tuner) -> tenant -> (latency, kube) -> gpu <-
// (gpu/nvml, gpu/dcgmexp, sim); latency and kube do the I/O attribution
// needs, so tenant does none. Tests may import more (tenant's tests drive
// the simulator). A package missing from the table fails the test, so a
// new package gets its place in the layers when it is added.
var layers = map[string][]string{
	"gpu":         nil,
	"gpu/nvml":    {"gpu"},
	"gpu/dcgmexp": {"gpu"},
	"sim":         {"gpu"},
	"sim/report":  {"gpu", "sim"},
	"latency":     {"gpu"},
	"kube":        {"gpu"},
	"tenant":      {"gpu", "latency", "kube"},
	"collector":   {"gpu", "tenant", "tuner"},
	"tuner":       {"gpu", "tenant"},
	// The tuner's policies: deciders over the engine, which imports none
	// of them, and the registry of their names above both.
	"tuner/autotune":  {"gpu", "tenant", "tuner"},
	"tuner/baseline":  {"gpu", "tenant", "tuner"},
	"tuner/rebalance": {"gpu", "tenant", "tuner"},
	"tuner/policies":  {"tuner", "tuner/autotune", "tuner/baseline", "tuner/rebalance"},
	// The serving pipeline: sampler -> builder -> store.
	"pipeline": {"gpu", "tenant"},
	// The simulator's driver, the oracle that replays through it and the
	// scenario tables over both.
	"simrun":       {"gpu", "latency", "sim", "sim/report", "tenant", "tuner", "tuner/autotune", "tuner/policies", "scenarios"},
	"oracle":       {"gpu", "sim", "sim/report", "simrun", "tenant", "tuner"},
	"simrun/table": {"oracle", "scenarios", "sim/report", "simrun", "tuner/baseline"},

	// The metrics endpoint's parts, over client_golang only: the
	// ready-rendered body per snapshot, the process's own metrics.
	"exposition":  {"httplimit"},
	"procmetrics": nil,
	"webui":       {"tuner", "tenant", "gpu", "httplimit"},
	// The HTTP server's limits: connections, timeouts, requests in flight.
	"httplimit": nil,
	// The garbage collector's pace for the exporter's bursts of allocation.
	"gcpace": nil,
	// The web configuration (exporter-toolkit's) kept last good.
	"webconf": nil,

	// Actuators that drive outside programs (through internal/command).
	"gpu/mps":       {"gpu"},
	"gpu/nvidiasmi": {"gpu"},
	"gpu/rebalance": {"gpu"},
	// The built-in Kubernetes eviction: the rebalancing hook's plans sent
	// to the API server (kube reads the service account token and CA).
	"gpu/kubeevict": {"gpu", "gpu/rebalance", "kube"},
	// The host's pause actuator: the cgroup freezer of a process's pod,
	// container or unit (kube parses the cgroup path), else signals.
	"gpu/pause": {"gpu", "kube"},
	// finds a VM's host process from its UUID (kube tells a machine's
	// scope from its cgroup path)
	"gpu/vmproc": {"gpu", "kube"},
	// The commands wire every layer; nothing imports a command.
	"cmd/vgpu_exporter": {"collector", "tuner", "tuner/autotune", "tuner/policies", "tuner/rebalance", "tenant", "latency", "kube", "gpu", "gpu/nvml", "gpu/dcgmexp", "gpu/mps", "gpu/nvidiasmi", "gpu/rebalance", "gpu/kubeevict", "gpu/pause", "gpu/vmproc", "sim", "scenarios", "exposition", "procmetrics", "webui", "httplimit", "pipeline", "gcpace", "webconf", "internal/flagvalue"},
	"cmd/vgpusim":       {"tuner", "tuner/autotune", "tuner/baseline", "gpu", "sim", "sim/report", "simrun", "simrun/table", "oracle", "scenarios", "internal/flagvalue"},
	// Leaves below every layer; any package may import them (see leaves).
	"internal/yamlconf":    nil,
	"internal/fileread":    nil,
	"internal/parallel":    nil,
	"internal/clip":        nil,
	"internal/ratelog":     nil,
	"internal/reap":        nil,
	"internal/redirect":    nil,
	"internal/cgroupfile":  nil,
	"internal/procread":    nil,
	"internal/poduid":      nil,
	"internal/overdue":     nil,
	"internal/dashjson":    nil,
	"internal/urlmask":     nil,
	"internal/energyguard": nil,
	"internal/headercap":   nil,
	// Test builders, imported only by test files (see testOnly).
	"internal/testutil": {"gpu"},
	"internal/simtest":  {"gpu", "sim", "simrun", "tenant"},
	"tuner/tunertest":   {"gpu", "tenant", "internal/testutil"},
	// what the tests of the URLs an operator configures share
	"internal/urlmask/urlmasktest": nil,

	"internal/command": nil,
	// Flag values for the commands.
	"internal/flagvalue":           nil,
	"internal/command/commandtest": nil, // fake programs for tests
	// Embedded data and test programs stand apart from the layers.
	"scenarios":           nil,
	"test/e2e":            nil,
	"test/device/compare": nil,
	"test/device/calib":   nil,
	"mixin/build":         nil,
	"mixin/render":        nil,
}

// leaves are packages that import no project package but leaves and that
// every package may import: the YAML syntax shared by the tenants and
// scenario files, the runner of outside programs the actuators drive, and
// the clip of outside text for messages, the rate limit of repeating
// log lines, the registry of the children the process waits for, the
// redirect policy of the clients that read a peer, the checked lines of
// /proc/PID/cgroup and a pod's UID, the reads of other processes' procfs
// files each bounded in time, the watch of a call that runs late, the reader of the generated
// dashboards, the form of a configured URL with its secrets masked, the
// check of a GPU energy counter's readings, the bound on a peer's answer
// headers.
var leaves = []string{"internal/yamlconf", "internal/fileread", "internal/command", "internal/parallel", "internal/clip", "internal/ratelog", "internal/reap", "internal/redirect", "internal/cgroupfile", "internal/procread", "internal/poduid", "internal/overdue", "internal/dashjson", "internal/urlmask", "internal/energyguard", "internal/headercap"}

// testOnly are packages for test files: no other package's non-test files
// may import them, so no test builder ends up in a binary.
var testOnly = []string{"internal/testutil", "internal/simtest", "tuner/tunertest", "internal/urlmask/urlmasktest"}

// TestLayering checks the import rule over every package of the module.
func TestLayering(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	imports, err := projectImports(root)
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have found the layers themselves, or it checked nothing.
	for _, p := range []string{"gpu", "latency", "kube", "tenant", "collector", "sim", "cmd/vgpu_exporter"} {
		if _, ok := imports[p]; !ok {
			t.Fatalf("package %s not found under %s", p, root)
		}
	}
	for _, v := range layeringViolations(imports, layers) {
		t.Error(v)
	}
}

// The checker itself reports what it should.
func TestLayeringViolations(t *testing.T) {
	rules := map[string][]string{"gpu": nil, "tenant": {"gpu"}, "sim": {"gpu"}, "collector": {"gpu", "tenant"}, "internal/yamlconf": nil, "internal/testutil": {"gpu"}, "internal/simtest": {"internal/testutil"}}
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    []string
	}{
		{"clean", map[string][]string{"gpu": nil, "tenant": {"gpu"}, "collector": {"tenant", "gpu"}, "sim": {"gpu"}}, nil},
		{"collector calls a backend", map[string][]string{"collector": {"tenant", "sim"}}, []string{"collector imports sim"}},
		{"sim imports tenant", map[string][]string{"sim": {"gpu", "tenant"}}, []string{"sim imports tenant"}},
		{"gpu imports upward", map[string][]string{"gpu": {"tenant"}}, []string{"gpu imports tenant"}},
		{"unknown package", map[string][]string{"newpkg": {"gpu"}}, []string{"newpkg is not in the layering table"}},
		{"a leaf from anywhere", map[string][]string{"sim": {"gpu", "internal/yamlconf"}, "gpu": {"internal/yamlconf"}}, nil},
		{"a leaf imports a layer", map[string][]string{"internal/yamlconf": {"gpu"}}, []string{"internal/yamlconf imports gpu"}},
		{"a test builder in production code", map[string][]string{"tenant": {"gpu", "internal/testutil"}}, []string{"tenant imports internal/testutil, which only test files may import"}},
		{"a test builder uses another", map[string][]string{"internal/simtest": {"internal/testutil"}}, nil},
	} {
		got := layeringViolations(tc.imports, rules)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], tc.want[i]) {
				t.Errorf("%s: %q lacks %q", tc.name, got[i], tc.want[i])
			}
		}
	}
}

// layeringViolations returns one line per import that rules do not allow
// and per package that rules do not know, sorted.
func layeringViolations(imports, rules map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		allowed, known := rules[pkg]
		if !known {
			out = append(out, fmt.Sprintf("%s is not in the layering table; give it its place in the layers", pkg))
			continue
		}
		for _, imp := range imps {
			if slices.Contains(testOnly, imp) && !slices.Contains(testOnly, pkg) {
				out = append(out, fmt.Sprintf("%s imports %s, which only test files may import", pkg, imp))
				continue
			}
			if !slices.Contains(allowed, imp) && !slices.Contains(leaves, imp) {
				out = append(out, fmt.Sprintf("%s imports %s, which the layering does not allow (allowed: %v)", pkg, imp, allowed))
			}
		}
	}
	sort.Strings(out)
	return out
}

// moduleRoot returns the directory of the module's go.mod above the
// working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// projectImports maps every package directory under root (by slash path
// relative to root) to the module packages its non-test .go files import,
// whatever their build tags.
func projectImports(root string) (map[string][]string, error) {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			// A nested module (deploy/) holds no package of this module.
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		imps := out[pkg]
		for _, im := range f.Imports {
			ip, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if rest, ok := strings.CutPrefix(ip, modulePath+"/"); ok && !slices.Contains(imps, rest) {
				imps = append(imps, path.Clean(rest))
			}
		}
		out[pkg] = imps
		return nil
	})
	return out, err
}

// devTools start programs but never run inside the exporter.
var devTools = []string{"mixin/render"}

// TestChildrenStartThroughReap: every file of the module that starts a
// program (exec.Command, exec.CommandContext, an exec.Cmd literal)
// registers it with internal/reap, whose reaper (the exporter as PID 1)
// would otherwise take its exit status: a file starts through reap.Start
// or reap.Run at least as many programs as it builds, and none through
// os.StartProcess or syscall.ForkExec. (A library that forks from C, as
// NVML could, is out of its sight.)
func TestChildrenStartThroughReap(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") ||
			strings.Contains(p, "/testdata/") || strings.Contains(p, "/deploy/") {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		if slices.Contains(devTools, filepath.ToSlash(rel)) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		starts, reaps := 0, 0
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				x, ok := n.X.(*ast.Ident)
				switch {
				case !ok:
				case x.Name == "exec" && strings.HasPrefix(n.Sel.Name, "Command"):
					starts++
				case x.Name == "reap" && (n.Sel.Name == "Start" || n.Sel.Name == "Run"):
					reaps++
				case x.Name == "os" && n.Sel.Name == "StartProcess", x.Name == "syscall" && (n.Sel.Name == "ForkExec" || n.Sel.Name == "StartProcess"):
					t.Errorf("%s starts a process with %s.%s, outside reap.Start", p, x.Name, n.Sel.Name)
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Cmd" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "exec" {
						starts++
					}
				}
			}
			return true
		})
		if starts > 0 {
			found++
			if reaps < starts {
				t.Errorf("%s builds %d exec.Cmd and starts %d through reap.Start or reap.Run", p, starts, reaps)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 2 {
		t.Fatalf("found %d files that start programs; the command runner and the pause watchdog do", found)
	}
}
