package main

import (
	"os"
	"path/filepath"
)

// makeOut makes the directory of --out, and those above it that are
// missing, before the run, so that one that cannot be made does not cost
// the run first. undo removes what it made, deepest first, where it is
// still empty: a run that then fails (a scenario or tenants file with an
// error, an interrupt) leaves no empty directories behind, and one that
// has written files keeps them.
func makeOut(dir string) (undo func(), err error) {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = append(made, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	undo = func() {
		for _, d := range made {
			_ = os.Remove(d) // fails, and keeps it, where not empty
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}
