package yamlconf

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Resolve follows alias nodes to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is an explicit or implicit null ("key:").
func IsNull(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// Field is a key a mapping gave: its value node, the line of the key, and
// whether the value was decoded (when not, its problem is already
// recorded). The key's line differs from the value's (Line) where the
// value is a block below it ("slo:" and its keys on the lines after).
type Field struct {
	*yaml.Node
	KeyLine int
	OK      bool
}

// Given maps the keys a mapping gave to their fields; a key not given
// reads as the zero Field.
type Given map[string]Field

// Key is where a mapping gave a key, and whether its value was decoded.
type Key struct {
	Line int // of the key
	OK   bool
}

// Keys maps the keys a mapping gave to where they are, for the checks
// made after decoding (of two fields together, or of the whole file) to
// put a problem at the key it is about. Unlike Given it holds no node: a
// decoded value keeps it without keeping the file's YAML tree alive.
type Keys map[string]Key

// Keys returns where each key given is; nil when g is (n was no mapping).
func (g Given) Keys() Keys {
	if g == nil {
		return nil
	}
	out := make(Keys, len(g))
	for k, f := range g {
		out[k] = Key{Line: f.KeyLine, OK: f.OK}
	}
	return out
}

// Line returns the line of key, or def when it was not given.
func (k Keys) Line(key string, def int) int {
	if x, given := k[key]; given {
		return x.Line
	}
	return def
}

// Failed reports whether key was given and its value did not decode (its
// problem is listed already).
func (k Keys) Failed(key string) bool {
	x, given := k[key]
	return given && !x.OK
}

// Fields decodes the mapping n into the struct dst points to, by the
// fields' yaml tags, and returns the keys it set. Unknown, repeated and
// merge (<<) keys are problems; so is a value of the wrong kind. what
// names the mapping in key problems ("a tenant"); prefix goes before a
// field's key in value problems ("slo." gives "slo.target: bad duration").
// A null n sets nothing.
//
// Fields are decoded by type: a type with UnmarshalYAML by that method
// (its *Errors are taken as they are; another error is put after the
// field's name), then string, signed integer (32-bit range), float64,
// bool, time.Duration ([ParseDuration]), Size ([ParseSize]), map of
// strings, slice and pointer of these.
func (e *Errors) Fields(n *yaml.Node, what, prefix string, dst any) Given {
	n = Resolve(n)
	if IsNull(n) {
		return Given{}
	}
	if n == nil || n.Kind != yaml.MappingNode {
		e.Addf(lineOf(n), "%s must be a mapping", what)
		return nil
	}
	sv := reflect.ValueOf(dst).Elem()
	index := fieldIndex(sv.Type())
	given := Given{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), Resolve(n.Content[i+1])
		key := k.Value
		f, known := index[key]
		switch {
		case key == "<<":
			e.Addf(k.Line, "merge keys (<<) are not supported in %s", what)
			continue
		case !known:
			e.Addf(k.Line, "unknown key %q in %s (known: %s)", key, what, knownList(index))
			continue
		}
		if _, dup := given[key]; dup {
			e.Addf(k.Line, "key %q given twice in %s", key, what)
			continue
		}
		// the key's line where it is written, not where an alias of it points
		given[key] = Field{Node: v, KeyLine: n.Content[i].Line, OK: e.value(v, prefix+key, sv.Field(f))}
	}
	return given
}

// fieldIndex maps yaml keys to field indexes of struct type t.
func fieldIndex(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		m[name] = i
	}
	return m
}

func knownList(index map[string]int) string {
	ks := make([]string, 0, len(index))
	for k := range index {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func lineOf(n *yaml.Node) int {
	if n == nil {
		return 1
	}
	return n.Line
}

// intBits is the size of an integer field (of any Go integer type) that
// Fields decodes: an integer out of int32's range is refused as such.
const intBits = 32

var (
	durationType = reflect.TypeFor[time.Duration]()
	sizeType     = reflect.TypeFor[Size]()
	unmarshaler  = reflect.TypeFor[yaml.Unmarshaler]()
)

// value decodes v into out, named name in problems; false after a problem.
func (e *Errors) value(v *yaml.Node, name string, out reflect.Value) bool {
	v = Resolve(v)
	scalar := v.Kind == yaml.ScalarNode
	t := out.Type()
	switch {
	case t == sizeType:
		sz, ok := parseScalar(e, v, name, "must be a size", ParseSize)
		if ok {
			out.Set(reflect.ValueOf(sz))
		}
		return ok
	case reflect.PointerTo(t).Implements(unmarshaler):
		nerr := e.problems
		if err := out.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(v); err != nil {
			if _, ok := err.(*Errors); ok {
				e.Add(err)
			} else {
				e.Addf(v.Line, "%s: %v", name, err)
			}
		}
		return e.problems == nerr
	case t == durationType:
		d, ok := parseScalar(e, v, name, "bad duration (use e.g. 250ms, 2s, 5m)", ParseDuration)
		if ok {
			out.SetInt(int64(d))
		}
		return ok
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		ok := e.value(v, name, p.Elem())
		out.Set(p)
		return ok
	case t.Kind() == reflect.String:
		if !scalar || IsNull(v) {
			e.Addf(v.Line, "%s must be a string", name)
			return false
		}
		out.SetString(v.Value)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		x, ok := e.integer(v, name)
		if ok {
			out.SetInt(x)
		}
		return ok
	case t.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(v.Value, 64)
		if !scalar || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			e.Addf(v.Line, "%s must be a number, got %q", name, v.Value)
			return false
		}
		out.SetFloat(x)
	case t.Kind() == reflect.Bool:
		var b bool
		if !scalar || v.Decode(&b) != nil {
			e.Addf(v.Line, "%s must be true or false, got %q", name, v.Value)
			return false
		}
		out.SetBool(b)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		return e.strMap(v, name, out)
	case t.Kind() == reflect.Slice:
		if IsNull(v) {
			return true
		}
		if v.Kind != yaml.SequenceNode {
			e.Addf(v.Line, "%s must be a list", name)
			return false
		}
		nerr := e.problems
		s := reflect.MakeSlice(t, len(v.Content), len(v.Content))
		for i, c := range v.Content {
			e.value(c, name, s.Index(i))
		}
		out.Set(s)
		return e.problems == nerr
	default:
		panic(fmt.Sprintf("yamlconf: field %s of type %s cannot be decoded", name, t))
	}
	return true
}

// quotedStyles are the styles of a scalar YAML reads as a string whatever
// its text.
const quotedStyles = yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle

// integer reads v, named name in problems, as a decimal integer of
// intBits bits (an optional sign, then digits). Refused, each at v's
// line: a quoted value (a string to YAML, "01750"), or one tagged other
// than !!int; digits with a leading 0, which YAML readers disagree on
// (010 is octal 8 to a YAML 1.1 reader, 10 to a YAML 1.2 one): a user ID
// written 01750 would otherwise select the processes of user 1000; and
// another base or digits grouped by _ (0x10, 0o17, 0b1, 1_000), which the
// tenants file does not take.
func (e *Errors) integer(v *yaml.Node, name string) (int64, bool) {
	if v.Kind != yaml.ScalarNode {
		e.Addf(v.Line, "%s must be an integer, got %q", name, v.Value)
		return 0, false
	}
	if v.Style&quotedStyles != 0 || v.Style&yaml.TaggedStyle != 0 && v.ShortTag() != "!!int" {
		e.Addf(v.Line, "%s must be an integer, got the string %q: write the number without quotes", name, v.Value)
		return 0, false
	}
	digits := strings.TrimLeft(v.Value, "+-")
	if len(v.Value)-len(digits) <= 1 && len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0123456789") == "" {
		e.Addf(v.Line, "%s: %s has a leading 0, which is ambiguous (octal to some YAML readers: 010 is 8 to them, 10 to others); write the number without it", name, v.Value)
		return 0, false
	}
	x, err := strconv.ParseInt(v.Value, 10, intBits)
	switch {
	case errors.Is(err, strconv.ErrRange):
		e.Addf(v.Line, "%s: %s is out of range, where an integer from %s is wanted", name, v.Value, intRange(fmt.Sprintf("int%d", intBits)))
		return 0, false
	case err == nil:
		return x, true
	}
	if _, other := strconv.ParseInt(v.Value, 0, 64); other == nil || errors.Is(other, strconv.ErrRange) {
		e.Addf(v.Line, "%s must be a decimal integer, got %q (0x, 0o, 0b and _ are not read)", name, v.Value)
		return 0, false
	}
	e.Addf(v.Line, "%s must be an integer, got %q", name, v.Value)
	return 0, false
}

// parseScalar reads a scalar v with parse; a value that is no scalar gets
// notScalar as its problem.
func parseScalar[T any](e *Errors, v *yaml.Node, name, notScalar string, parse func(string) (T, error)) (T, bool) {
	var x T
	err := errors.New(notScalar)
	if v.Kind == yaml.ScalarNode {
		x, err = parse(v.Value)
	}
	if err != nil {
		e.Addf(v.Line, "%s: %v", name, err)
		return x, false
	}
	return x, true
}

func (e *Errors) strMap(n *yaml.Node, name string, out reflect.Value) bool {
	if n.Kind != yaml.MappingNode {
		e.Addf(n.Line, "%s must be a mapping of names to values", name)
		return false
	}
	nerr := e.problems
	m := reflect.MakeMap(out.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), Resolve(n.Content[i+1])
		kv := reflect.ValueOf(k.Value).Convert(out.Type().Key())
		if m.MapIndex(kv).IsValid() {
			e.Addf(k.Line, "key %q given twice in %s", k.Value, name)
			continue
		}
		if v.Kind != yaml.ScalarNode || IsNull(v) {
			e.Addf(v.Line, "%s: value of %q must be a string", name, k.Value)
			continue
		}
		m.SetMapIndex(kv, reflect.ValueOf(v.Value).Convert(out.Type().Elem()))
	}
	out.Set(m)
	return e.problems == nerr
}
