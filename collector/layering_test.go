package collector

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoIO keeps the collectors to rendering snapshots: nothing they import
// does I/O, neither the standard library's I/O nor the project's I/O
// packages (latency sources, the kubelet). Which project packages they may
// import is checked module-wide by TestLayering in cmd/vgpu_exporter.
func TestNoIO(t *testing.T) {
	const module = "github.com/vgpu-exporter/vgpu_exporter/"
	forbidden := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "io/ioutil": true, "syscall": true,
		module + "latency": true, module + "kube": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); forbidden[p] {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files found")
	}
}
