// Package dashjson reads the generated Grafana dashboards (one JSON file
// each) into a type of the reader's choosing.
package dashjson

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Load reads every dashboard of dir (*.json, in name order) into a T;
// uid gives a dashboard's uid, which each must have.
func Load[T any](dir string, uid func(*T) string) ([]T, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s: no dashboards (*.json)", dir)
	}
	slices.Sort(files)
	var out []T
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d T
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if uid(&d) == "" {
			return nil, fmt.Errorf("%s: no uid", f)
		}
		out = append(out, d)
	}
	return out, nil
}
