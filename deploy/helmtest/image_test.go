package helmtest

import (
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// TestImageDigest: image.digest pulls the exporter's image by digest,
// repository@digest in place of the tag, and a digest of another form
// (no algorithm, short, capitals) fails the rendering naming the value;
// before, the chart had no such value (the schema refused it), and an
// image could be pinned only by a tag, which a registry may move.
func TestImageDigest(t *testing.T) {
	c := loadChart(t)
	sha := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		image map[string]any
		want  string
	}{
		{map[string]any{}, "ghcr.io/vgpu-exporter/vgpu_exporter:" + c.Metadata.AppVersion},
		{map[string]any{"tag": "v2"}, "ghcr.io/vgpu-exporter/vgpu_exporter:v2"},
		{map[string]any{"digest": sha}, "ghcr.io/vgpu-exporter/vgpu_exporter@" + sha},
		{map[string]any{"repository": "registry.example:5000/gpu/exporter", "tag": "v2", "digest": sha}, "registry.example:5000/gpu/exporter@" + sha},
		{map[string]any{"digest": "sha512:" + strings.Repeat("ab", 64)}, "ghcr.io/vgpu-exporter/vgpu_exporter@sha512:" + strings.Repeat("ab", 64)},
		// A digest in the tag (TAG@DIGEST, pinning before image.digest
		// existed) is pulled as given; image.digest, set too, replaces it.
		{map[string]any{"tag": "v2@" + sha}, "ghcr.io/vgpu-exporter/vgpu_exporter:v2@" + sha},
		{map[string]any{"tag": "v2@" + sha, "digest": "sha512:" + strings.Repeat("ab", 64)}, "ghcr.io/vgpu-exporter/vgpu_exporter@sha512:" + strings.Repeat("ab", 64)},
	} {
		m := mustRender(t, c, map[string]any{"image": tc.image})
		if got := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Image; got != tc.want {
			t.Errorf("image %v: %q, want %q", tc.image, got, tc.want)
		}
	}
	reloader := mustRender(t, c, map[string]any{"tenants": map[string]any{"config": map[string]any{"tenants": []any{}}, "reload": "sidecar",
		"reloader": map[string]any{"image": map[string]any{"tag": "v0.14.0@" + sha}}}})
	if got, want := container(t, reloader.daemonSets[0].Spec.Template.Spec.Containers, "tenants-reloader").Image, "ghcr.io/jimmidyson/configmap-reload:v0.14.0@"+sha; got != want {
		t.Errorf("reloader's tag v0.14.0@DIGEST: %q, want %q", got, want)
	}
	var cases []valuesCase
	for _, d := range []string{strings.TrimPrefix(sha, "sha256:"), "sha256:abc", strings.ToUpper(sha), sha + "0", "@" + sha, "latest", "sha1:" + strings.Repeat("a", 40)} {
		cases = append(cases, valuesCase{map[string]any{"image": map[string]any{"digest": d}}, "at '/image/digest'"})
	}
	checkCases(t, cases, nil)
}

// kubelet is the kubelet's verdict on an image's reference (it parses it
// as distribution/reference does): no error, it pulls it.
func kubelet(image string) []string {
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// TestImageAsTheKubelet: the exporter's and the reloader's image
// (repository, tag, digest) render where the kubelet parses the image
// they give and are refused where it does not; before, the schema took
// any repository and tag (a tag in the repository, capitals, a space),
// and the pod never started (InvalidImageName), or the API server
// refused it (a space at an end).
func TestImageAsTheKubelet(t *testing.T) {
	sha := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	image := func(k, s string) map[string]any { return map[string]any{"image": map[string]any{k: s}} }
	reloader := func(k, s string) map[string]any {
		return map[string]any{"tenants": map[string]any{"config": map[string]any{"tenants": []any{}}, "reload": "sidecar",
			"reloader": map[string]any{"image": map[string]any{k: s}}}}
	}
	long := func(n int) string { return strings.Repeat("r", n) }
	appVersion := loadChart(t).Metadata.AppVersion
	checkNames(t, []nameField{
		{"image.repository", func(s string) map[string]any { return image("repository", s) }, func(s string) []string { return kubelet(s + ":v1") }},
		{"tenants.reloader.image.repository", func(s string) map[string]any { return reloader("repository", s) }, func(s string) []string { return kubelet(s + ":v1") }},
	}, []string{"ghcr.io/vgpu-exporter/vgpu_exporter", "busybox", "library/busybox", "a/b/c/d", "a_b/c", "a__b/c", "a--b/c", "a.b/c", "A.b/c",
		"Registry.Example/x", "localhost/x", "localhost:5000/x", "registry:5000/x", "[::1]:5000/x", "10.0.0.1:5000/gpu/exporter",
		"ghcr.io/Vgpu/x", "ghcr.io/x:v1", "ghcr.io/x@" + sha, " ghcr.io/x", "ghcr.io/x ", "gh cr.io/x", "-a/b", "a-/b", "a._b/c", "a.b_c/d",
		"a___b/c", "Foo/bar", "foo/Bar", "docker.io/library/x", "ghcr.io/", "/x", "ghcr.io//x", "ghcr.io:/x", "ghcr.io:port/x", "", long(247), long(248), "a/" + long(253), "a/" + long(254),
		"ghcr.io/" + long(247), "ghcr.io/x/ä",
		// The kubelet bounds the path, the registry aside: 255 characters
		// after a registry, and library/NAME for docker.io/NAME.
		"registry.example.com/" + long(255), "registry.example.com/" + long(256), "registry.example.com/a/" + long(253),
		"registry.example.com/a/" + long(254), "localhost/" + long(255), "localhost/" + long(256), "localhost:5000/" + long(255),
		"localhost:5000/" + long(256), "[::1]:5000/" + long(255), "[::1]:5000/" + long(256), "Registry/" + long(255), "Registry/" + long(256),
		"localhostx/" + long(244), "localhostx/" + long(245), "docker.io/" + long(247), "docker.io/" + long(248), "index.docker.io/" + long(247),
		"index.docker.io/" + long(248), "docker.io/a/" + long(253), "docker.io/a/" + long(254), "docker.io", "localhost",
		"a_b.com/" + long(247), "a_b.com/" + long(248), // not a host name: the whole name is the path
		long(200) + "." + long(200) + "/x"})
	checkNames(t, []nameField{
		{"image.tag", func(s string) map[string]any { return image("tag", s) }, func(s string) []string {
			if s == "" {
				s = appVersion // the chart's default
			}
			return kubelet("ghcr.io/x:" + s)
		}},
		{"tenants.reloader.image.tag", func(s string) map[string]any { return reloader("tag", s) }, func(s string) []string {
			if s == "" {
				return []string{"the reloader's tag is required"}
			}
			return kubelet("ghcr.io/x:" + s)
		}},
	}, []string{"", "v1", "V1.2_3-rc.4", "_x", ".x", "-x", "x y", " x", "x:y", "x@y", "x/y", long(128), long(129), "ä",
		// A digest after the tag (TAG@DIGEST): the kubelet pulls by the digest.
		"v1.2.3@" + sha, "v1@sha384:" + strings.Repeat("ab", 48), "v1@sha512:" + strings.Repeat("ab", 64), long(128) + "@" + sha,
		long(129) + "@" + sha, "@" + sha, "v1@", "v1@" + strings.ToUpper(sha), "v1@sha256:abc", "v1@sha1:" + strings.Repeat("ab", 20),
		"v1@" + sha + "@" + sha, "v1@" + sha + " ", "v1@" + strings.TrimPrefix(sha, "sha256:")})
	checkNames(t, []nameField{{"image.digest", func(s string) map[string]any { return image("digest", s) }, func(s string) []string {
		if s == "" {
			return nil
		}
		return kubelet("ghcr.io/x@" + s)
	}}}, []string{"", sha, "sha384:" + strings.Repeat("ab", 48), "sha512:" + strings.Repeat("ab", 64), strings.ToUpper(sha),
		"sha256:" + strings.Repeat("ab", 31), "sha512:" + strings.Repeat("ab", 32), "sha1:" + strings.Repeat("ab", 20), "md5:" + strings.Repeat("ab", 16)})
}

// FuzzImageAsTheKubelet: the schema's image repository and tag take what
// the kubelet parses (NAME:v1, ghcr.io/x:TAG) and refuse what it does not,
// whatever the string; the path's bound (255 characters, the registry
// aside; library/NAME for a name alone) depends on which first component
// the kubelet takes for a registry.
func FuzzImageAsTheKubelet(f *testing.F) {
	sha := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	r := strings.Repeat("r", 240)
	for _, s := range []string{"busybox", "a/b", "registry.example.com/" + r + "rrrrrrrrrrrrrrr", "localhost/" + r, "a_b.com/" + r + "rrrrrr",
		"docker.io/" + r + "rrrrrrr", "index.docker.io/" + r + "rrrrrrrr", "Registry/" + r, "[::1]:5000/" + r, "v1@" + sha, "@" + sha, "x y"} {
		f.Add(s)
	}
	repository, tag := schemaDefinition(f, "imageRepository"), schemaDefinition(f, "imageTag")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := repository.Validate(s) == nil, kubelet(s+":v1") == nil; got != want {
			t.Errorf("repository %q (%d bytes): the schema takes it %v, the kubelet %v (%v)", s, len(s), got, want, kubelet(s+":v1"))
		}
		if got, want := tag.Validate(s) == nil, s == "" || kubelet("ghcr.io/x:"+s) == nil; got != want {
			t.Errorf("tag %q (%d bytes): the schema takes it %v, the kubelet %v (%v)", s, len(s), got, want, kubelet("ghcr.io/x:"+s))
		}
	})
}
