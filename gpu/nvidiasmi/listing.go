package nvidiasmi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
)

// gpuRef is a GPU as nvidia-smi's output names it: by UUID ("GPU-..."), by
// PCI bus ID ("00000000:3B:00.0") or by index ("GPU 0").
type gpuRef struct {
	kind byte   // refUUID, refBus or refIndex; 0: the output names none
	id   string // lower case; a bus ID with an 8-digit domain
}

const (
	refUUID  = 'u'
	refBus   = 'b'
	refIndex = 'i'
)

func (r gpuRef) String() string {
	switch r.kind {
	case refUUID, refBus:
		return r.id
	case refIndex:
		return "GPU " + r.id
	}
	return "(none named)"
}

// gpuRefs are the names one line gives its GPU: one, or several ways of
// naming it ("GPU 0: ... (UUID: GPU-...)", as `nvidia-smi -L` lists a
// GPU), which only nvidia-smi's answer which GPU is which tells one GPU
// (levelOf); none where the line names no GPU.
type gpuRefs []gpuRef

// String is the line's first name, the others in parentheses: "GPU 0
// (gpu-0)".
func (rs gpuRefs) String() string {
	switch len(rs) {
	case 0:
		return gpuRef{}.String()
	case 1:
		return rs[0].String()
	}
	rest := make([]string, len(rs)-1)
	for i, r := range rs[1:] {
		rest[i] = r.String()
	}
	return rs[0].String() + " (" + strings.Join(rest, ", ") + ")"
}

// entry is one time-slice level compute-policy's listing gives, and the
// GPU it gives it for: as named on its line, else on the nearest line
// above that names one (a header such as "GPU 00000000:3B:00.0"), else
// none.
type entry struct {
	gpu   gpuRefs
	level gpu.TimeSliceLevel
}

// parseListing reads compute-policy's listing (its stdout), strictly: on
// each line that names the time slice ("Timeslice", "Time Slice"), exactly
// one level word (default, short, medium, long) after that name, given for
// the GPU that line (or the nearest above naming one) names, by every name
// the line gives it. It reports false when no line gives a level, when a
// line gives none or several, or when the output reports a failure (an
// error message that mentions a level is not a reading).
func parseListing(out []byte) ([]entry, bool) {
	if failed(out) {
		return nil, false
	}
	var entries []entry
	var current gpuRefs
	for line := range strings.SplitSeq(string(out), "\n") {
		if refs := lineRefs(line); len(refs) > 0 {
			current = refs
		}
		l, named, ok := lineLevel(line)
		if !ok {
			return nil, false
		}
		if named {
			entries = append(entries, entry{gpu: current, level: l})
		}
	}
	return entries, len(entries) > 0
}

// lineLevel finds the time-slice level on one line of the listing: named
// reports whether the line names the time slice, ok false where it does
// so but with no level word, several, or inside another word.
func lineLevel(line string) (l gpu.TimeSliceLevel, named, ok bool) {
	line = strings.ToLower(line)
	words := strings.FieldsFunc(line, func(r rune) bool { return !(r >= 'a' && r <= 'z') })
	at := -1
	for i, w := range words {
		if w == "timeslice" || (w == "slice" && i > 0 && words[i-1] == "time") {
			at = i
			break
		}
	}
	if at < 0 {
		// the name inside another word: not a field
		return "", false, !strings.Contains(strings.ReplaceAll(line, " ", ""), "timeslice")
	}
	for _, w := range words[at+1:] {
		if slices.Contains(levels, gpu.TimeSliceLevel(w)) {
			if l != "" {
				return "", true, false
			}
			l = gpu.TimeSliceLevel(w)
		}
	}
	return l, true, l != ""
}

// lineRefs returns the names of GPUs one line of nvidia-smi's output
// gives, each once: a UUID, a PCI bus ID, or "GPU" followed by an index.
func lineRefs(line string) gpuRefs {
	var refs gpuRefs
	add := func(r gpuRef) {
		if !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	words := strings.FieldsFunc(strings.ToLower(line), func(r rune) bool {
		return r == ' ' || r == '\t' || r == '|' || r == ',' || r == '\r' || r == '='
	})
	for i, w := range words {
		w = strings.Trim(w, ":;()[]\"'")
		switch {
		case strings.HasPrefix(w, "gpu-") && len(w) > len("gpu-"):
			add(gpuRef{refUUID, w})
		case busID(w) != "":
			add(gpuRef{refBus, busID(w)})
		case w == "gpu" && i+1 < len(words):
			if n := strings.TrimRight(words[i+1], ":"); n != "" && strings.Trim(n, "0123456789") == "" {
				if v, err := strconv.Atoi(n); err == nil {
					add(gpuRef{refIndex, strconv.Itoa(v)})
				}
			}
		}
	}
	return refs
}

// busID returns the PCI bus ID w spells (DOMAIN:BUS:DEVICE.FUNCTION, in
// hexadecimal, the domain of 4 to 8 digits) with an 8-digit domain, in
// lower case; "" where w is none.
func busID(w string) string {
	dom, rest, ok := strings.Cut(w, ":")
	if !ok || len(dom) < 4 || len(dom) > 8 || !hex(dom) || len(rest) != 7 || rest[2] != ':' || rest[5] != '.' ||
		!hex(rest[:2]) || !hex(rest[3:5]) || !hex(rest[6:]) {
		return ""
	}
	return strings.Repeat("0", 8-len(dom)) + strings.ToLower(dom) + ":" + strings.ToLower(rest)
}

func hex(s string) bool {
	return s != "" && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// identity is how nvidia-smi names one GPU: its UUID, bus ID and index.
type identity struct {
	uuid, bus, index string
}

// identityArgs ask nvidia-smi how it names the GPU uuid (parseIdentity).
func identityArgs(uuid string) []string {
	return []string{"-i", uuid, "--query-gpu=index,pci.bus_id,uuid", "--format=csv,noheader"}
}

// parseIdentity reads identityArgs' answer (its stdout), exactly one line
// "INDEX, BUS_ID, UUID", which must be the GPU uuid's.
func parseIdentity(out []byte, uuid string) (identity, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Split(lines[0], ",")
	if len(lines) != 1 || len(f) != 3 {
		return identity{}, fmt.Errorf("want one line INDEX, BUS_ID, UUID")
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	id := identity{uuid: strings.ToLower(f[2]), bus: busID(f[1]), index: f[0]}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 || strconv.Itoa(n) != f[0] || id.bus == "" {
		return identity{}, fmt.Errorf("want one line INDEX, BUS_ID, UUID")
	}
	if id.uuid != strings.ToLower(uuid) {
		return identity{}, fmt.Errorf("it names GPU %s, not %s", command.Excerpt([]byte(f[2]), 128), uuid)
	}
	return id, nil
}

// is reports whether r names the GPU id.
func (id identity) is(r gpuRef) bool {
	switch r.kind {
	case refUUID:
		return r.id == id.uuid
	case refBus:
		return r.id == id.bus
	case refIndex:
		return r.id == id.index
	}
	return false
}
