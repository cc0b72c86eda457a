// Package image tests the container image built from the repository's
// Dockerfile: a base made from Debian packages with mmdebstrap, the image
// assembled with buildah, run with podman on the simulator, scraped and
// stopped.
package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// The user the image runs as (the distroless "nonroot" user).
const imageUser = "65532:65532"

// tools the test needs; .ci/run installs them.
var tools = []string{"mmdebstrap", "buildah", "podman", "runc"}

// ulimits podman asks the runtime to set. Podman's defaults raise the open
// files and processes limits above what some sandboxes allow (setrlimit
// fails with EPERM); these are below any hard limit and ample for the
// exporter.
var ulimits = []string{"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}

// skipOrFail skips the test, or fails it under CI=true when the reason is
// something .ci/run should have provided.
func skipOrFail(t *testing.T, ciProvides bool, format string, args ...any) {
	t.Helper()
	if ciProvides && os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// env runs the container tools with their own storage under dir, so the test
// neither needs nor touches the machine's image store.
type env struct {
	t       *testing.T
	ctx     context.Context
	storage []string
	workdir string
}

func (e *env) run(name string, args ...string) (string, error) {
	if name == "buildah" || name == "podman" {
		args = append(append([]string{}, e.storage...), args...)
	}
	cmd := exec.CommandContext(e.ctx, name, args...)
	cmd.Dir = e.workdir
	cmd.Env = append(os.Environ(), "BUILDAH_ISOLATION=chroot")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func (e *env) must(name string, args ...string) string {
	e.t.Helper()
	out, err := e.run(name, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a container image; not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("container image test needs Linux, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		t.Skip("container image test runs mmdebstrap and podman as root (rootful, vfs storage); running as uid", os.Geteuid())
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, true, "container image test needs %s (apt-get install %s): %v", tool, strings.Join(tools, " "), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Not t.TempDir: the container tools may still be letting go of their
	// storage when the test ends, and t.TempDir fails the test when its
	// removal does; this directory is removed with retries and, at worst,
	// left behind with a log line.
	dir, err := os.MkdirTemp("", "vgpu-image-test-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, workdir: dir, storage: []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs",
	}}
	t.Cleanup(func() {
		// vfs layers are plain copies; podman's container state lives under
		// the same root, so remove containers and images before the
		// directory goes.
		_, _ = e.run("podman", "rm", "--all", "--force")
		_, _ = e.run("buildah", "rm", "--all")
		_, _ = e.run("podman", "rmi", "--all", "--force")
		var err error
		for range 10 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("could not remove %s: %v", dir, err)
	})
	root := repo.Root()

	// The exporter, built here (the Dockerfile's build stage needs a Go
	// image from a registry this test does not reach).
	bin := filepath.Join(dir, "build", "out", "vgpu_exporter")
	if err := repo.BuildExporter(bin); err != nil {
		t.Fatal(err)
	}

	// A glibc base from Debian packages: libc6 and its dependencies, the
	// host's CA bundle, and nothing else (no shell, like distroless).
	suite := os.Getenv("VGPU_IMAGE_TEST_SUITE")
	if suite == "" {
		suite = "bookworm"
	}
	if out, err := e.run("mmdebstrap", "--variant=extract", "--include=libc6",
		`--extract-hook=mkdir -p "$1/etc/ssl/certs" "$1/tmp" && chmod 1777 "$1/tmp"`,
		"--extract-hook=copy-in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs",
		suite, "base.tar"); err != nil {
		// Only Debian's mirrors are needed; without them there is no base.
		skipOrFail(t, false, "mmdebstrap could not make the base from Debian packages (mirror unreachable?): %v\n%s", err, out)
	}
	ctr := strings.TrimSpace(e.must("buildah", "from", "scratch"))
	e.must("buildah", "add", ctr, "base.tar", "/")
	e.must("buildah", "commit", "--quiet", ctr, "localhost/vgpu-test-base")

	// The image, from the Dockerfile, with the binary built above in place
	// of the build stage and the Debian base in place of distroless.
	e.must("buildah", "build", "--isolation", "chroot", "--quiet",
		"--file", filepath.Join(root, "Dockerfile"),
		"--build-context", "build="+filepath.Join(dir, "build"),
		"--build-arg", "BASE_IMAGE=localhost/vgpu-test-base",
		"--build-arg", "REVISION=test",
		"--tag", "localhost/vgpu_exporter:test", root)

	// Can this machine run a container at all? The base has no shell, but
	// its dynamic loader answers --help.
	if _, err := e.run("podman", append(append([]string{"--runtime", "runc", "run", "--rm", "--network=host"}, ulimits...),
		"localhost/vgpu-test-base", "/lib64/ld-linux-x86-64.so.2", "--help")...); err != nil {
		skipOrFail(t, false, "this machine cannot run containers (podman run of the bare Debian base failed; the image was built but not run): %v", err)
	}

	checkConfig(t, e.must("podman", "image", "inspect", "localhost/vgpu_exporter:test"))

	addr := repo.FreeAddr(t)
	id := strings.TrimSpace(e.must("podman", append(append([]string{"--runtime", "runc", "run", "--detach", "--network=host"}, ulimits...),
		"localhost/vgpu_exporter:test", "--backend=sim", "--sim.scenario=h200-mig", "--web.listen-address="+addr)...))
	logs := func() string { out, _ := e.run("podman", "logs", id); return out }

	readyCtx, readyCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer readyCancel()
	if err := repo.WaitReady(readyCtx, "http://"+addr+"/-/ready"); err != nil {
		t.Fatalf("exporter in the container never became ready: %v\nlogs:\n%s", err, logs())
	}
	body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{"vgpu_exporter_build_info{", "vgpu_gpu_up{", "vgpu_mig_"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics from the container has no %q", want)
		}
	}

	// The process runs as the image's user, not root.
	pid := strings.TrimSpace(e.must("podman", "inspect", "--format", "{{.State.Pid}}", id))
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatalf("reading the container's process status: %v", err)
	}
	if uid := field(string(status), "Uid:"); !strings.HasPrefix(uid, "65532\t") {
		t.Errorf("exporter runs with Uid %q, want 65532", uid)
	}

	// A clean stop: SIGTERM, exit status 0.
	e.must("podman", "stop", "--time", "20", id)
	if code := strings.TrimSpace(e.must("podman", "inspect", "--format", "{{.State.ExitCode}}", id)); code != "0" {
		t.Errorf("exporter exited with status %s after podman stop, want 0\nlogs:\n%s", code, logs())
	}
}

// checkConfig checks the image's configuration: user, entrypoint, port and
// the NVIDIA container toolkit's variables.
func checkConfig(t *testing.T, inspect string) {
	t.Helper()
	var imgs []struct {
		Config struct {
			User         string
			Entrypoint   []string
			Env          []string
			ExposedPorts map[string]struct{}
		}
	}
	if err := json.Unmarshal([]byte(inspect), &imgs); err != nil || len(imgs) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, inspect)
	}
	c := imgs[0].Config
	if c.User != imageUser {
		t.Errorf("image user %q, want %q", c.User, imageUser)
	}
	if strings.Join(c.Entrypoint, " ") != "/bin/vgpu_exporter" {
		t.Errorf("image entrypoint %q, want [/bin/vgpu_exporter]", c.Entrypoint)
	}
	if _, ok := c.ExposedPorts["9949/tcp"]; !ok {
		t.Errorf("image exposes %v, want 9949/tcp", c.ExposedPorts)
	}
	for _, want := range []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility"} {
		found := false
		for _, kv := range c.Env {
			found = found || kv == want
		}
		if !found {
			t.Errorf("image environment %q lacks %s", c.Env, want)
		}
	}
}

func field(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	return string(b)
}
