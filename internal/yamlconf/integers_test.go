package yamlconf

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Fractional names each number with a fraction given to an integer field,
// and each number written as a float out of the field's range (which
// yaml.v3 decoded as the type's least value when below it), at its line,
// through pointers, lists and nested mappings; a whole number written as
// one (2.0, 1e3), a float field and a type with its own UnmarshalYAML are
// left alone.
func TestFractional(t *testing.T) {
	type inner struct {
		N  *int     `yaml:"n"`
		Us []uint8  `yaml:"us"`
		F  float64  `yaml:"f"`
		D  Duration `yaml:"d"`
	}
	type outer struct {
		I     int64   `yaml:"i"`
		Inner []inner `yaml:"inner"`
		P     *inner  `yaml:"p"`
	}
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"whole numbers", "i: 2.0\ninner: [{n: 1e3, us: [1, 2.0], f: 1.5, d: 1.5s}]\n", nil},
		{"top", "i: 1.5\n", []string{"t:1: i: `1.5` has a fraction, where an integer is wanted"}},
		{"nested", "inner:\n  - {n: 1}\n  - {n: 0.5, us: [1, 2.25]}\np: {n: -3.5}\n", []string{
			"t:3: n: `0.5` has a fraction, where an integer is wanted",
			"t:3: us: `2.25` has a fraction, where an integer is wanted",
			"t:4: n: `-3.5` has a fraction, where an integer is wanted"}},
		{"alias", "p: &a {n: 0.5}\ninner: [*a, *a]\n", []string{"t:1: n: `0.5` has a fraction, where an integer is wanted"}},
		{"unknown key and wrong kind left to the decoder", "x: 1.5\ninner: 1.5\n", nil},
		{"out of range", "i: -1e30\ninner: [{n: -99999999999999999999, us: [256.0, -1.0, 255.0]}]\np: {n: -9.3e18}\n", []string{
			"t:1: i: `-1e30` is out of range, where an integer from -9223372036854775808 to 9223372036854775807 is wanted",
			"t:2: n: `-99999999999999999999` is out of range, where an integer from -9223372036854775808 to 9223372036854775807 is wanted",
			"t:2: us: `256.0` is out of range, where an integer from 0 to 255 is wanted",
			"t:2: us: `-1.0` is out of range, where an integer from 0 to 255 is wanted",
			"t:3: n: `-9.3e18` is out of range, where an integer from -9223372036854775808 to 9223372036854775807 is wanted"}},
		{"at the range's ends", "i: -9.223372036854775808e18\ninner: [{us: [0.0, 255.0]}]\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(tc.in), &root); err != nil {
				t.Fatal(err)
			}
			errs := &Errors{File: "t"}
			errs.Fractional(&root, reflect.TypeFor[outer]())
			var got []string
			if errs.Err() != nil {
				got = strings.Split(errs.Error(), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
