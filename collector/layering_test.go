package collector

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering keeps the collectors to rendering snapshots: among the
// project's packages they import only gpu and tenant (never a backend), and
// nothing that does I/O.
func TestLayering(t *testing.T) {
	const module = "github.com/vgpu-exporter/vgpu_exporter/"
	allowed := map[string]bool{module + "gpu": true, module + "tenant": true}
	forbidden := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "io/ioutil": true, "syscall": true}
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
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(p, module) && !allowed[p] || forbidden[p] {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files found")
	}
}
