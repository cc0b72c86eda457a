package yamlconf

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Fractional adds a problem to e for each number with a fraction (1.5)
// that root gives to an integer field of the value of type t it decodes
// into, at its line: yaml.v3's decoder truncates it (code: 1.5 decodes
// as 1) where an integer is wanted. It does the same for a number written
// as a float (-1e30, or an integer of more digits than 64 bits hold) that
// is out of the field's range: yaml.v3 refuses one above the range but
// decodes one below it as the type's least value (seed: -1e30 decoded as
// -9223372036854775808). Fields are matched by their yaml tags; a type
// with its own UnmarshalYAML is its own judge.
func (e *Errors) Fractional(root *yaml.Node, t reflect.Type) {
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	e.fractional(root, "", t, 0)
}

// maxFractionalDepth bounds fractional's walk (aliases may nest deeply).
const maxFractionalDepth = 64

func (e *Errors) fractional(n *yaml.Node, name string, t reflect.Type, depth int) {
	n = Resolve(n)
	if n == nil || depth > maxFractionalDepth || e.Full() {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return
	}
	switch {
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
			return
		}
		x, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
		case !outOfRange(x, t) && x != math.Trunc(x):
			e.Addf(n.Line, "%s: `%s` has a fraction, where an integer is wanted", name, n.Value)
		case outOfRange(x, t):
			e.Addf(n.Line, "%s: `%s` is out of range, where an integer from %s is wanted", name, n.Value, intRange(t.Kind().String()))
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for _, c := range n.Content {
			e.fractional(c, name, t.Elem(), depth+1)
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		index := fieldIndex(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if f, ok := index[k]; ok {
				e.fractional(n.Content[i+1], k, t.Field(f).Type, depth+1)
			}
		}
	}
}

// outOfRange reports whether x is outside the values of integer type t
// (NaN and the infinities are).
func outOfRange(x float64, t reflect.Type) bool {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint {
		return !(x >= 0 && x < math.Ldexp(1, bits))
	}
	return !(x >= -math.Ldexp(1, bits-1) && x < math.Ldexp(1, bits-1))
}
