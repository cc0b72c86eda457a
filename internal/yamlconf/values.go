package yamlconf

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Size is a size in bytes. In YAML it is a number of bytes or a number
// with a unit: decimal K, M, G, T or binary Ki, Mi, Gi, Ti, each with or
// without a trailing B ("4MiB", "4Mi", "4M", "71GB", "512B", "1e9").
type Size uint64

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][0-9]+)?)\s*([KMGT]i?B?|B)?\s*$`)

// ParseSize reads a Size.
func ParseSize(s string) (Size, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("bad size %q (use e.g. 4MiB, 512KiB, 1048576)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	unit := strings.TrimSuffix(m[2], "B")
	base := 1000.0
	if strings.HasSuffix(unit, "i") {
		base = 1024
		unit = strings.TrimSuffix(unit, "i")
	}
	if i := strings.Index("KMGT", unit); unit != "" && i >= 0 {
		v *= math.Pow(base, float64(i+1))
	}
	if v >= 1<<63 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return Size(v), nil
}

// UnmarshalYAML reads a Size for a plain yaml.v3 decoder; its problems are
// yaml.TypeErrors, so that the decoder goes on and lists them all.
func (b *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a byte size", n.Line)}}
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: bad byte size %q (want e.g. 40GiB, 71GB, 1073741824)", n.Line, n.Value)}}
	}
	*b = v
	return nil
}

// ParseDuration reads Go durations ("250ms", "1m30s") and Prometheus ones
// ("1d", "2w").
func ParseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("bad duration %q (use e.g. 250ms, 2s, 5m)", s)
}
