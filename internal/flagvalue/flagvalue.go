// Package flagvalue holds kingpin flag values whose parse errors name the
// flag and say what was expected.
package flagvalue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// kingpin's own value parsers return errors that do not name the flag
// ("time: invalid duration"); these values say which flag was wrong.

type durationValue struct {
	name string
	p    *time.Duration
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("--%s: %q is not a duration (for example 1s, 500ms, 2m)", v.name, s)
	}
	*v.p = d
	return nil
}

func (v durationValue) String() string { return v.p.String() }

type intValue struct {
	name string
	p    *int64
}

func (v intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return fmt.Errorf("--%s: %q is not an integer", v.name, s)
	}
	*v.p = n
	return nil
}

func (v intValue) String() string { return strconv.FormatInt(*v.p, 10) }

// FloatPtr is a flag value that sets *P to a new float64: nil until the
// flag is given. Name is the flag's name, for its errors.
type FloatPtr struct {
	Name string
	P    **float64
}

func (v FloatPtr) Set(s string) error {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("--%s: %q is not a number (for example 2.5)", v.Name, s)
	}
	*v.P = &x
	return nil
}

func (v FloatPtr) String() string {
	if *v.P == nil {
		return ""
	}
	return strconv.FormatFloat(**v.P, 'g', -1, 64)
}

type enumValue struct {
	name    string
	p       *string
	allowed []string
}

func (v enumValue) Set(s string) error {
	if err := oneOf(v.name, s, v.allowed); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// oneOf is the error of flag name given s where it takes one of allowed.
func oneOf(name, s string, allowed []string) error {
	if !slices.Contains(allowed, s) {
		return fmt.Errorf("--%s: %q is not one of %s", name, s, strings.Join(allowed, ", "))
	}
	return nil
}

func (v enumValue) String() string { return *v.p }

// Duration adds a duration flag whose parse error names the flag.
func Duration(app *kingpin.Application, name, help, def string, p *time.Duration) *kingpin.FlagClause {
	f := app.Flag(name, help).Default(def)
	f.SetValue(durationValue{name: name, p: p})
	return f
}

// Int64 adds an integer flag whose parse error names the flag.
func Int64(app *kingpin.Application, name, help, def string, p *int64) *kingpin.FlagClause {
	f := app.Flag(name, help).Default(def)
	f.SetValue(intValue{name: name, p: p})
	return f
}

// Enum adds a flag that takes one of allowed, naming the flag and the
// allowed values when it is given another.
func Enum(app *kingpin.Application, name, help, def string, p *string, allowed ...string) *kingpin.FlagClause {
	f := app.Flag(name, help).Default(def).HintOptions(allowed...)
	f.SetValue(OneOf(name, p, allowed...))
	return f
}

// OneOf is a flag value, for SetValue, that takes one of allowed, naming
// the flag (name, without its dashes) when it is given another.
func OneOf(name string, p *string, allowed ...string) kingpin.Value {
	return enumValue{name: name, p: p, allowed: allowed}
}

// EachOf is a repeatable flag value, for SetValue, each of whose values
// is one of allowed, naming the flag when one is not.
func EachOf(name string, p *[]string, allowed ...string) kingpin.Value {
	return &enumsValue{name: name, p: p, allowed: allowed}
}

type enumsValue struct {
	name    string
	p       *[]string
	allowed []string
}

func (v *enumsValue) Set(s string) error {
	if err := oneOf(v.name, s, v.allowed); err != nil {
		return err
	}
	*v.p = append(*v.p, s)
	return nil
}

func (v *enumsValue) String() string { return strings.Join(*v.p, ",") }

// IsCumulative makes the flag repeatable.
func (v *enumsValue) IsCumulative() bool { return true }
