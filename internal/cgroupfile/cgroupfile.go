// Package cgroupfile reads the lines of /proc/PID/cgroup, checked: the
// kernel does not escape a cgroup's name, so a cgroup named with a line
// break in it (a delegated subtree lets a tenant name its cgroups) would
// otherwise forge a line of its own.
package cgroupfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Line is one line of /proc/PID/cgroup: a hierarchy's ID, its controllers
// ("" for the unified v2 hierarchy) and the process's path in it.
type Line struct{ ID, Controllers, Path string }

// Unified says whether l is the unified (v2) hierarchy's line ("0::").
func (l Line) Unified() bool { return l.ID == "0" && l.Controllers == "" }

// Lines splits the contents of /proc/PID/cgroup into its lines. It
// refuses what no kernel writes: a hierarchy or a controller listed
// twice, a line after the unified hierarchy's (the kernel lists it
// last), a hierarchy other than the unified one (0) without controllers
// or the unified one with some, an ID not written in plain decimal. A
// process in a cgroup it named "x\n0::/other", or on a host with the
// unified hierarchy alone "x\n5::/other", would otherwise read as a
// process of cgroup "/other". Blank lines are skipped; any other line not
// hierarchy-ID:controllers:path is an error.
func Lines(data []byte) ([]Line, error) {
	var out []Line
	ids, ctrls := map[string]int{}, map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" {
			continue
		}
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %d: want hierarchy-ID:controllers:path, got %q", line, l)
		}
		if id, err := strconv.Atoi(parts[0]); err != nil || id < 0 || strconv.Itoa(id) != parts[0] {
			return nil, fmt.Errorf("line %d: bad hierarchy ID %q", line, parts[0])
		}
		if (parts[0] == "0") != (parts[1] == "") {
			return nil, fmt.Errorf("line %d: hierarchy %s with controllers %q: only the unified hierarchy, 0, has none: a cgroup name with a line break in it", line, parts[0], parts[1])
		}
		if parts[0] == "0" {
			// the kernel marks the unified cgroup of a process that outlived
			// it (a zombie's) " (deleted)": still the path of its pod
			parts[2] = strings.TrimSuffix(parts[2], " (deleted)")
		}
		if at, ok := ids[parts[0]]; ok {
			return nil, fmt.Errorf("line %d: hierarchy %s listed again (first at line %d): a cgroup name with a line break in it", line, parts[0], at)
		}
		if at, ok := ids["0"]; ok {
			return nil, fmt.Errorf("line %d: a line after the unified hierarchy's (line %d), which the kernel lists last: a cgroup name with a line break in it", line, at)
		}
		ids[parts[0]] = line
		if parts[1] != "" {
			for _, c := range strings.Split(parts[1], ",") {
				if at, ok := ctrls[c]; ok {
					return nil, fmt.Errorf("line %d: controller %q listed again (first at line %d): a cgroup name with a line break in it", line, c, at)
				}
				ctrls[c] = line
			}
		}
		out = append(out, Line{parts[0], parts[1], parts[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Unified is the path of the unified hierarchy's line of the contents of
// /proc/PID/cgroup, "" without one; an error where host.Lines refuses
// them (host nil: Lines alone).
func Unified(data []byte, host *Host) (string, error) {
	lines, err := host.Lines(data)
	if err != nil {
		return "", err
	}
	for _, l := range lines {
		if l.Unified() {
			return l.Path, nil
		}
	}
	return "", nil
}

// Host is what the kernel lists in every process's /proc/PID/cgroup, read
// from the exporter's own file: one line for each hierarchy mounted, the
// same hierarchy IDs with the same controllers for every process (the
// unified hierarchy's, "0::", where a cgroup2 is mounted; none on a legacy
// cgroup v1 host). A file with another set is forged: a kernel before 4.13
// takes a line break in a cgroup name, and a tenant with a delegated
// subtree of name=systemd (Delegate=yes) names a cgroup "x\n0::" or
// "x\n99:fake:" with the path it likes below it; a line of a hierarchy
// the host lacks, or a unified line listed last, as the kernel lists it,
// is not one Lines can tell from the kernel's. The zero Host (and a nil
// one) checks nothing.
type Host struct {
	self string                 // the exporter's own cgroup file; "" checks nothing
	own  atomic.Pointer[string] // its hierarchies (hierarchies' key), once read
}

// NewHost checks other processes' files against self, the exporter's own
// /proc/self/cgroup.
func NewHost(self string) *Host { return &Host{self: self} }

// Check refuses lines, a process's, whose hierarchies (IDs and their
// controllers) are not those of the exporter's own file. The own file's
// are kept from its first read, and read again where a process's differ
// (a hierarchy mounted since is listed for every process from its mount
// on, the exporter's too): one read in all while no hierarchy is mounted
// or unmounted, and none for a process that lists the same ones. An own
// file that cannot be read, or that Lines refuses, checks nothing.
func (h *Host) Check(lines []Line) error {
	if h == nil || h.self == "" {
		return nil
	}
	theirs := hierarchies(lines)
	if own := h.own.Load(); own != nil && *own == theirs {
		return nil
	}
	data, err := os.ReadFile(h.self)
	if err != nil {
		return nil
	}
	ownLines, err := Lines(data)
	if err != nil {
		return nil
	}
	own := hierarchies(ownLines)
	h.own.Store(&own)
	if own == theirs {
		return nil
	}
	if i := slices.IndexFunc(lines, Line.Unified); i >= 0 && !slices.ContainsFunc(ownLines, Line.Unified) {
		return fmt.Errorf("a unified hierarchy's line, %q, where the kernel lists none (%s has none: no cgroup2 mounted): a cgroup name with a line break in it", "0::"+lines[i].Path, h.self)
	}
	return fmt.Errorf("hierarchies %s, where the kernel lists %s for every process (%s): a cgroup name with a line break in it", theirs, own, h.self)
}

// Lines is the package's Lines of data, the contents of another process's
// /proc/PID/cgroup, then Check of them: an error where either refuses
// them. A nil h checks the lines alone.
func (h *Host) Lines(data []byte) ([]Line, error) {
	lines, err := Lines(data)
	if err != nil {
		return nil, err
	}
	if err := h.Check(lines); err != nil {
		return nil, err
	}
	return lines, nil
}

// hierarchies is the set of lines' hierarchies, "ID:controllers" each,
// in order of ID, joined by spaces: "[0: 1:name=systemd 4:memory]".
func hierarchies(lines []Line) string {
	hs := make([]string, len(lines))
	for i, l := range lines {
		hs[i] = l.ID + ":" + l.Controllers
	}
	slices.SortFunc(hs, func(a, b string) int {
		ai, _ := strconv.Atoi(a[:strings.IndexByte(a, ':')])
		bi, _ := strconv.Atoi(b[:strings.IndexByte(b, ':')])
		return ai - bi
	})
	return "[" + strings.Join(hs, " ") + "]"
}
