// Package repo locates the repository around the deploy module and builds
// the exporter from it, for the deployment tests.
package repo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Root is the repository's top directory.
func Root() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

// Match is the first submatch of re in the repository's file (a path from
// Root); no such file, or no match, fails tb naming both.
func Match(tb testing.TB, file, re string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Root(), file))
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(re).FindSubmatch(b)
	if m == nil {
		tb.Fatalf("%s: nothing matches %s", file, re)
	}
	return string(m[1])
}

// DefaultNodeLock is the exporter's --tuner.node-lock default
// (tuner.DefaultNodeLock), which the systemd unit's tuner and the chart's
// pods in enforce lock.
func DefaultNodeLock(tb testing.TB) string {
	tb.Helper()
	return Match(tb, "tuner/nodelock.go", `(?m)^const DefaultNodeLock = "([^"]+)"$`)
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

var flagName = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--(\[no-\])?([a-z0-9][a-z0-9.-]*)`)

// ExporterFlags lists the flags the exporter at bin shows in --help (for a
// --[no-]x flag, both x and no-x).
func ExporterFlags(bin string) (map[string]bool, error) {
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --help: %v\n%s", bin, err, out)
	}
	flags := map[string]bool{}
	for _, m := range flagName.FindAllStringSubmatch(string(out), -1) {
		flags[m[2]] = true
		if m[1] != "" {
			flags["no-"+m[2]] = true
		}
	}
	if !flags["web.listen-address"] || !flags["backend"] {
		return nil, fmt.Errorf("no flags found in %s --help:\n%s", bin, out)
	}
	return flags, nil
}

// UnknownFlags returns the arguments of args that are not flags of the
// exporter (each must be --name or --name=value).
func UnknownFlags(flags map[string]bool, args []string) []string {
	var bad []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !flags[name] {
			bad = append(bad, a)
		}
	}
	return bad
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Exporter builds vgpu_exporter once per test binary and returns its path;
// Cleanup removes it.
func Exporter(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "vgpu-deploy-test")
		if buildErr == nil {
			buildErr = BuildExporter(filepath.Join(binDir, "vgpu_exporter"))
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(binDir, "vgpu_exporter")
}

// Cleanup removes what Exporter built; call it from TestMain.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitReady polls url until it answers 200 or ctx ends (a bound, not a
// timing assertion).
func WaitReady(ctx context.Context, url string) error {
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v)", url, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
