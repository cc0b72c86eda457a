package scenarios

import (
	"fmt"
	"io/fs"

	"go.yaml.in/yaml/v3"
)

// Head is what a scenario file says of itself: its name, description and
// duration as written ("" when absent), and how many GPUs and tenants it
// declares.
type Head struct {
	Name, Description, Duration string
	GPUs, Tenants               int
}

// Head reads the head of the scenario file, without loading the scenario
// (vgpusim list shows it).
func (b Builtin) Head() (Head, error) {
	data, err := fs.ReadFile(b.FS, b.Path)
	if err != nil {
		return Head{}, err
	}
	var h struct {
		Name        string      `yaml:"name"`
		Description string      `yaml:"description"`
		Duration    string      `yaml:"duration"`
		GPUs        []yaml.Node `yaml:"gpus"`
		Tenants     []yaml.Node `yaml:"tenants"`
	}
	if err := yaml.Unmarshal(data, &h); err != nil {
		return Head{}, fmt.Errorf("built-in scenario %s: %w", b.Path, err)
	}
	return Head{Name: h.Name, Description: h.Description, Duration: h.Duration, GPUs: len(h.GPUs), Tenants: len(h.Tenants)}, nil
}
