package sim

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on the scenario's free strings (docs/simulator.md, Limits). The
// simulator writes each where it shows the thing named: a tenant's name and
// a GPU's UUID on every row of a run's series (tenants.csv, gpus.csv) and in
// the tables it prints, the others in the readings (the exporter's labels)
// and in its messages; so a long one multiplied the series' size (a 110 KB
// scenario wrote 100 MB of tenants.csv in 10 simulated seconds) and a
// control character or a line break reached the terminal. Each bound is
// the real thing's, far above any real name.
const (
	// maxNameLen bounds a tenant's name, and a scenario's, a VM's and a
	// model's: a tenants file's tenant name is bounded so (a Kubernetes
	// object's name).
	maxNameLen = 253
	// maxUUIDLen bounds a GPU's or MIG instance's UUID: NVML's buffer for
	// one (NVML_DEVICE_UUID_V2_BUFFER_SIZE) holds 96 bytes with the NUL.
	maxUUIDLen = 95
	// maxVGPUTypeLen bounds a vGPU type's name: NVML's buffer for one
	// (NVML_VGPU_NAME_BUFFER_SIZE) holds 64 bytes with the NUL.
	maxVGPUTypeLen = 63
	// maxPathLen bounds an executable and a cgroup path: the kernel's
	// PATH_MAX (4096 bytes with the NUL).
	maxPathLen = 4095
)

// tenantNameRE is a tenant's name: as a tenants file's (letters, digits,
// '_', '-', '.'), so that a simulated tenant can be named there.
var tenantNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// textKind is what a free string may hold besides its length.
type textKind int

const (
	// textName: letters, digits, '_', '-', '.' (tenantNameRE).
	textName textKind = iota
	// textToken: printable ASCII without spaces.
	textToken
	// textLine: printable ASCII, spaces included.
	textLine
	// textUTF8: UTF-8 without control characters or line breaks, as a
	// name the exporter reads may be (a VM's vm_name label).
	textUTF8
)

// text is one free string of the scenario: where it is, its value, its
// bound and what it may hold.
type text struct {
	path []any
	v    string
	max  int
	kind textKind
}

// checkTexts refuses a free string of the scenario over its bound or with
// a character its kind does not allow, naming the field and its place;
// those left out (empty: a default follows) are not checked.
func (p *parser) checkTexts(sc *Scenario) error {
	ts := []text{{[]any{"name"}, sc.Name, maxNameLen, textLine}}
	for i, g := range sc.GPUs {
		ts = append(ts, text{[]any{"gpus", i, "uuid"}, g.UUID, maxUUIDLen, textToken})
		for j, m := range g.MIG {
			ts = append(ts, text{[]any{"gpus", i, "mig", j, "uuid"}, m.UUID, maxUUIDLen, textToken})
		}
	}
	for i, t := range sc.Tenants {
		at := func(k ...any) []any { return append([]any{"tenants", i}, k...) }
		ts = append(ts,
			text{at("name"), t.Name, maxNameLen, textName},
			text{at("process", "executable"), t.Process.Executable, maxPathLen, textLine},
			text{at("process", "cgroup"), t.Process.Cgroup, maxPathLen, textToken},
			text{at("vm", "name"), t.VM.Name, maxNameLen, textUTF8},
			text{at("vm", "type"), t.VM.Type, maxVGPUTypeLen, textToken},
			text{at("workload", "model_name"), t.Workload.Model, maxNameLen, textUTF8},
		)
	}
	for _, t := range ts {
		if msg := t.problem(); msg != "" {
			return p.errAt(t.path, "%s %s", fieldName(t.path), msg)
		}
	}
	return nil
}

// problem says what is wrong with t, "" when nothing is.
func (t text) problem() string {
	switch {
	case t.v == "":
		return ""
	case len(t.v) > t.max:
		return fmt.Sprintf("%.32q... is %d bytes long; at most %d", t.v, len(t.v), t.max)
	case t.kind == textName && !tenantNameRE.MatchString(t.v):
		return fmt.Sprintf("%q: use letters, digits, '_', '-', '.'", t.v)
	case t.kind == textUTF8:
		return utf8Problem(t.v)
	}
	for _, c := range []byte(t.v) {
		if c < ' ' || c > '~' || (c == ' ' && t.kind == textToken) {
			what := "printable ASCII"
			if t.kind == textToken {
				what += " without spaces"
			}
			return fmt.Sprintf("%q: use %s (no control characters or line breaks)", t.v, what)
		}
	}
	return ""
}

// utf8Problem says what is wrong with a textUTF8 string v, "" when
// nothing is: bytes that are not UTF-8, a control character (C0, DEL,
// C1) or a line or paragraph separator.
func utf8Problem(v string) string {
	if !utf8.ValidString(v) {
		return fmt.Sprintf("%+q: not UTF-8", v)
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return fmt.Sprintf("%+q: use UTF-8 without control characters or line breaks", v)
		}
	}
	return ""
}

// fieldName is the field at path as a reader finds it in the file:
// tenants[3].vm.name.
func fieldName(path []any) string {
	var b strings.Builder
	for _, k := range path {
		switch k := k.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, k)
		}
	}
	return b.String()
}
