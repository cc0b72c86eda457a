//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The images the cluster runs, built here and imported into containerd
// (the cluster pulls nothing).
const (
	pauseImage    = "localhost/vgpu-kube-pause:test"
	exporterRepo  = "localhost/vgpu_exporter"
	exporterTag   = "kube-test"
	exporterImage = exporterRepo + ":" + exporterTag
)

// imageBuilder runs buildah with its own storage under dir.
type imageBuilder struct {
	dir string
	ctx context.Context
}

func (b *imageBuilder) buildah(args ...string) (string, error) {
	storage := []string{"--root", filepath.Join(b.dir, "storage"), "--runroot", filepath.Join(b.dir, "run"), "--storage-driver", "vfs"}
	out, err := run(b.ctx, b.dir, []string{"BUILDAH_ISOLATION=chroot"}, "buildah", append(storage, args...)...)
	return strings.TrimSpace(out), err
}

// image makes name from scratch: files (source path -> path in the
// image), the entrypoint and the user; it returns the docker archive.
func (b *imageBuilder) image(name string, files [][2]string, entrypoint, user string) (string, error) {
	ctr, err := b.buildah("from", "scratch")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if _, err := b.buildah("copy", ctr, f[0], f[1]); err != nil {
			return "", err
		}
	}
	if _, err := b.buildah("config", "--entrypoint", fmt.Sprintf("[%q]", entrypoint), "--user", user, ctr); err != nil {
		return "", err
	}
	if _, err := b.buildah("commit", "--quiet", "--rm", ctr, name); err != nil {
		return "", err
	}
	archive := filepath.Join(b.dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
	if _, err := b.buildah("push", "--quiet", name, "docker-archive:"+archive+":"+name); err != nil {
		return "", err
	}
	return archive, nil
}

var sharedLib = regexp.MustCompile(`(/\S+\.so[.\d]*)`)

// buildImages builds the pause binary and the exporter (cgo, as released)
// and their images: the pause binary alone, the exporter with the shared
// libraries it links. It returns the docker archives.
func buildImages(ctx context.Context, repoRoot, moduleDir, dir string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pause := filepath.Join(dir, "pause")
	if _, err := run(ctx, moduleDir, []string{"CGO_ENABLED=0"}, "nice", "-n", "19", "go", "build", "-o", pause, "./pause"); err != nil {
		return nil, err
	}
	exporter := filepath.Join(dir, "vgpu_exporter")
	if _, err := run(ctx, repoRoot, []string{"CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations"},
		"nice", "-n", "19", "go", "build", "-o", exporter, "./cmd/vgpu_exporter"); err != nil {
		return nil, err
	}
	ldd, err := run(ctx, "", nil, "ldd", exporter)
	if err != nil {
		return nil, err
	}
	files := [][2]string{{exporter, "/bin/vgpu_exporter"}}
	for _, lib := range sharedLib.FindAllString(ldd, -1) {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return nil, err
		}
		files = append(files, [2]string{real, lib})
	}
	b := &imageBuilder{dir: dir, ctx: ctx}
	pauseTar, err := b.image(pauseImage, [][2]string{{pause, "/pause"}}, "/pause", "65535:65535")
	if err != nil {
		return nil, err
	}
	exporterTar, err := b.image(exporterImage, files, "/bin/vgpu_exporter", "65532:65532")
	if err != nil {
		return nil, err
	}
	return []string{pauseTar, exporterTar}, nil
}
