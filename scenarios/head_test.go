package scenarios

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestHead(t *testing.T) {
	lib := fstest.MapFS{
		"full.yaml":   {Data: []byte("name: full\ndescription: two GPUs\nduration: 90s\ngpus: [{uuid: a}, {uuid: b}]\ntenants: [{name: x}, {name: y}, {name: z}]\n")},
		"bare.yaml":   {Data: []byte("gpus: [{uuid: a}]\n")},
		"broken.yaml": {Data: []byte("gpus: [\n")},
	}
	for _, tc := range []struct {
		path   string
		want   Head
		errHas string
	}{
		{"full.yaml", Head{Name: "full", Description: "two GPUs", Duration: "90s", GPUs: 2, Tenants: 3}, ""},
		{"bare.yaml", Head{GPUs: 1}, ""},
		{"broken.yaml", Head{}, "built-in scenario broken.yaml"},
		{"absent.yaml", Head{}, "absent.yaml"},
	} {
		h, err := Builtin{Name: "x", FS: lib, Path: tc.path}.Head()
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: error %v, want one with %q", tc.path, err, tc.errHas)
			}
			continue
		}
		if err != nil || h != tc.want {
			t.Errorf("%s: %+v, %v, want %+v", tc.path, h, err, tc.want)
		}
	}
	// Every built-in scenario has a head with GPUs and tenants.
	bs, err := List()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if h, err := b.Head(); err != nil || h.GPUs == 0 || h.Tenants == 0 {
			t.Errorf("%s: head %+v, %v", b.Name, h, err)
		}
	}
}
