package helmtest

import (
	"strings"
	"testing"
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
	} {
		m := mustRender(t, c, map[string]any{"image": tc.image})
		if got := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Image; got != tc.want {
			t.Errorf("image %v: %q, want %q", tc.image, got, tc.want)
		}
	}
	var cases []valuesCase
	for _, d := range []string{strings.TrimPrefix(sha, "sha256:"), "sha256:abc", strings.ToUpper(sha), sha + "0", "@" + sha, "latest", "sha1:" + strings.Repeat("a", 40)} {
		cases = append(cases, valuesCase{map[string]any{"image": map[string]any{"digest": d}}, "at '/image/digest'"})
	}
	checkCases(t, cases, nil)
}
