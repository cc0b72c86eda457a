// Package yamlconf holds what the project's YAML files share: one YAML
// document parsed with bounded aliasing, an error list that keeps the
// line of every problem and lists them all, a strict decoder of mappings
// into structs (unknown and repeated keys are problems), and the size and
// duration syntax of every file.
//
// Each configuration type implements yaml.Unmarshaler: it sets its
// defaults, decodes its mapping with [Errors.Fields], checks what the
// fields say together, and returns the problems it found (an *Errors, or
// nil). Decode at the top turns them into "file:line: problem" lines.
//
// It imports no package of the project but the leaf internal/clip, so
// that every layer may use it.
package yamlconf

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// Problem is one problem at a line of the file.
type Problem struct {
	Line int
	Msg  string
}

// Errors collects problems in the order they are found. The zero value
// collects every problem; File and Max are set for the list of a whole
// file. An *Errors is the error that UnmarshalYAML methods return.
type Errors struct {
	// File names the file in Error ("" inside a single type: "line N: ...").
	File string
	// Max is how many problems are listed; later ones are counted and one
	// line says where they begin. 0 lists all.
	Max int

	list      []Problem
	seen      map[Problem]bool // to list each problem once (aliases repeat them)
	problems  int              // problems found, listed or not
	dropped   int              // problems not listed beyond Max
	firstDrop int              // line of the first of those
}

// Addf records a problem at line (1 when unknown).
func (e *Errors) Addf(line int, format string, args ...any) {
	e.add(Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (e *Errors) add(p Problem) {
	if p.Line <= 0 {
		p.Line = 1
	}
	e.problems++
	if e.seen[p] {
		return // the same problem again, through an alias
	}
	if e.Max > 0 && len(e.list) >= e.Max {
		if e.dropped == 0 {
			e.firstDrop = p.Line
		}
		e.dropped++
		return
	}
	if e.seen == nil {
		e.seen = map[Problem]bool{}
	}
	e.seen[p] = true
	e.list = append(e.list, p)
}

// Add records err: the problems of an *Errors, each message of a
// yaml.TypeError, or another error (its "line N:" prefix, if any, gives
// the line). A nil err adds nothing.
func (e *Errors) Add(err error) {
	var list *Errors
	var te *yaml.TypeError
	switch {
	case err == nil:
	case errors.As(err, &list):
		for _, p := range list.list {
			e.add(p)
		}
		e.problems += list.problems - len(list.list)
	case errors.As(err, &te):
		for _, msg := range te.Errors {
			p := splitLine(msg)
			p.Msg = plainTypeError(p.Msg)
			e.add(p)
		}
	default:
		e.add(splitLine(err.Error()))
	}
}

// Lines returns the lines of the problems listed so far, in order found.
func (e *Errors) Lines() []int {
	out := make([]int, len(e.list))
	for i, p := range e.list {
		out[i] = p.Line
	}
	return out
}

// Problems is the number of problems found, listed or not.
func (e *Errors) Problems() int { return e.problems }

// Full reports whether no further problem would be listed.
func (e *Errors) Full() bool { return e.Max > 0 && len(e.list) >= e.Max }

// Err returns e when it holds a problem, else nil.
func (e *Errors) Err() error {
	if e.problems == 0 {
		return nil
	}
	return e
}

// MaxMessageBytes bounds a problem as Error lists it: a problem quotes
// what the file holds (a key, a value), which may be as long as the file.
const MaxMessageBytes = 1024

// Error lists the problems, one a line, as "file:line: problem", each cut
// after MaxMessageBytes (clip.Text: control characters escaped, so that a
// problem stays on its line).
func (e *Errors) Error() string {
	lines := make([]string, 0, len(e.list)+1)
	for _, p := range e.list {
		lines = append(lines, e.at(p.Line)+clip.Text(p.Msg, MaxMessageBytes))
	}
	if e.dropped > 0 {
		lines = append(lines, e.at(e.firstDrop)+"further problems from here on not listed")
	}
	return strings.Join(lines, "\n")
}

func (e *Errors) at(line int) string {
	if e.File == "" {
		return fmt.Sprintf("line %d: ", line)
	}
	return fmt.Sprintf("%s:%d: ", e.File, line)
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?(?:unmarshal errors:\s*)?(?:line (\d+): )?((?s).*)$`)

// splitLine reads yaml.v3's "yaml: line N: problem" (or "line N: ...");
// a message without a line is put at line 1.
func splitLine(msg string) Problem {
	m := lineRE.FindStringSubmatch(strings.TrimSpace(msg))
	if m == nil {
		return Problem{Line: 1, Msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	return Problem{Line: line, Msg: m[2]}
}

var (
	unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	cannotDecodeRE = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: (`.*`|[^ ]+))? into (\\S+)$")
)

// plainTypeError says a yaml.v3 type error in the file's terms: a key the
// type lacks is unknown, a value of the wrong kind is named with what the
// key takes, never a Go type ("field x not found in type sim.spec").
func plainTypeError(msg string) string {
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown key %q", m[1])
	}
	m := cannotDecodeRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := "another kind of value"
	switch t := strings.TrimPrefix(m[3], "*"); {
	case strings.HasPrefix(t, "float"):
		want = "a number"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		want = "an integer"
	case t == "bool":
		want = "true or false"
	case t == "string":
		want = "a string"
	case strings.HasPrefix(t, "[]"):
		want = "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		want = "a mapping of keys"
	}
	kind := map[string]string{"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false", "seq": "a list", "map": "a mapping", "null": "null"}[m[1]]
	if kind == "" {
		kind = "a " + m[1]
	}
	if m[2] == "" {
		return fmt.Sprintf("%s here, where %s is wanted", kind, want)
	}
	if m[1] == "int" && want == "an integer" {
		// An integer where one is wanted: yaml.v3 refuses it for the
		// type's range (a negative for an unsigned key, too many digits).
		return fmt.Sprintf("%s is out of range, where an integer from %s is wanted", m[2], intRange(strings.TrimPrefix(m[3], "*")))
	}
	if m[1] == "float" && want == "an integer" {
		// yaml.v3 truncates a fraction (Fractional reports it): it refuses
		// a float for an integer only past the type's range (1e30, or an
		// integer of more digits than 64 bits hold), or NaN
		if strings.Contains(strings.ToLower(m[2]), "nan") {
			return fmt.Sprintf("%s is not a number, where an integer is wanted", m[2])
		}
		return fmt.Sprintf("%s is out of range, where an integer from %s is wanted", m[2], intRange(strings.TrimPrefix(m[3], "*")))
	}
	return fmt.Sprintf("%s is %s, where %s is wanted", m[2], kind, want)
}

// intRange says the values Go integer type t holds ("0 to 255" for uint8).
func intRange(t string) string {
	bits := 64
	if n, err := strconv.Atoi(strings.TrimLeft(t, "uint")); err == nil {
		bits = n
	}
	if strings.HasPrefix(t, "uint") {
		return fmt.Sprintf("0 to %d", uint64(1)<<bits-1)
	}
	return fmt.Sprintf("%d to %d", -int64(1)<<(bits-1), int64(1)<<(bits-1)-1)
}
