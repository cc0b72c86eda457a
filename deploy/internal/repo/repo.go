// Package repo locates the repository around the deploy module and builds
// the exporter from it, for the deployment tests.
package repo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Root is the repository's top directory.
func Root() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

// BuildExporter builds vgpu_exporter (cgo on, as `make build`) into bin.
func BuildExporter(bin string) error {
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vgpu_exporter")
	cmd.Dir = Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/vgpu_exporter: %v\n%s", err, out)
	}
	return nil
}
