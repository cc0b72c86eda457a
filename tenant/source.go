package tenant

import "fmt"

// ConfigSource says where a tenants configuration comes from: a file
// (Path), built-in data (Name and Data: a built-in scenario's companion
// tenants file), or nowhere (zero value: every usage is unassigned).
type ConfigSource struct {
	Path string
	Name string
	Data []byte
}

// String describes the source for the log.
func (t ConfigSource) String() string {
	switch {
	case t.Path != "":
		return t.Path
	case t.Name != "":
		return "built-in " + t.Name
	default:
		return "none (all usage is unassigned)"
	}
}

// Load parses the tenants configuration t names. A file that defines no
// tenants is refused (NotEmpty) unless allowEmpty, with a hint at the
// exporter's --tenants.allow-empty; built-in data is taken as it is.
func (t ConfigSource) Load(allowEmpty bool) (*Config, error) {
	switch {
	case t.Path != "":
		cfg, err := LoadConfig(t.Path)
		if err == nil && !allowEmpty {
			if err = NotEmpty(cfg); err != nil {
				err = fmt.Errorf("%w (start with --tenants.allow-empty if that is intended)", err)
			}
		}
		return cfg, err
	case t.Name != "":
		return ParseConfig(t.Name, t.Data)
	default:
		return EmptyConfig(), nil
	}
}
