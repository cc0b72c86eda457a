package main

import (
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"testing"
)

// outputs are the top-level directories of build outputs and caches
// (.gitignore): nothing of the repository's own.
var outputs = []string{"build", "out", "render", ".gl"}

// repoFiles returns the files under root, relative and slash-separated,
// whose base name matches one of patterns (path.Match), walking the tree
// rather than asking git, so that a tree exported without its history (a
// release tarball, git archive) is checked as a clone is. .git, vendor,
// node_modules, build outputs and, with noTestdata, testdata directories
// are left out.
func repoFiles(t *testing.T, noTestdata bool, patterns ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (name == ".git" || name == "vendor" || name == "node_modules" ||
				noTestdata && name == "testdata" || slices.Contains(outputs, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, pat := range patterns {
			if ok, _ := path.Match(pat, name); ok {
				out = append(out, rel)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}
