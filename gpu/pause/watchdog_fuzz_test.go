package pause

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// Whatever line the watchdog reads, parseLine takes only a freeze with a
// positive lease or a thawed, of an absolute cgroup directory or a process
// group above 1, and its error quotes the line; and a group the pauser
// would freeze (a directory ownCgroup gives: absolute, no control
// character) comes through the pipe as it went in, its lease too.
func FuzzParseLine(f *testing.F) {
	for _, l := range []string{
		"freeze v2 /sys/fs/cgroup/a b.service 1s", "thawed v2 /sys/fs/cgroup/a b.service",
		"freeze v1 /sys/fs/cgroup/freezer/x 300ms", "freeze pgid 77 1s", "thawed pgid 77",
		"freeze v2 relative 1s", "freeze v9 /x 1s", "freeze v2 /x", "thaw v2 /x", "freeze pgid 1 1s",
		"freeze v2 /x -1s", "freeze v2 /x\r 1s",
	} {
		f.Add(l, "/sys/fs/cgroup/kubepods.slice/pod 1", int64(time.Second), uint8(0))
	}
	f.Add("", "/a\rb", int64(1), uint8(1))
	f.Add("", "77", int64(time.Hour), uint8(2))
	f.Fuzz(func(t *testing.T, line, dir string, lease int64, kind uint8) {
		op, g, l, err := parseLine(line, nil)
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), strconv.Quote(line)) {
				t.Fatalf("parseLine(%q): error %q does not quote the line", line, err)
			}
		case op == "freeze":
			if l <= 0 || line != "freeze "+g.Spec()+" "+line[strings.LastIndexByte(line, ' ')+1:] {
				t.Fatalf("parseLine(%q) = %s, %s, %v", line, op, g.Spec(), l)
			}
		case op == "thawed":
			if line != "thawed "+g.Spec() {
				t.Fatalf("parseLine(%q) = %s, %s", line, op, g.Spec())
			}
		default:
			t.Fatalf("parseLine(%q) = op %q", line, op)
		}

		// what the parent writes for a group it would freeze
		var sent group
		switch kind % 3 {
		case 0, 1:
			if !filepath.IsAbs(dir) || strings.ContainsFunc(dir, unicode.IsControl) {
				return
			}
			sent = cgroupV2{dir: dir}
			if kind%3 == 1 {
				sent = cgroupV1{dir: dir}
			}
		case 2:
			n, err := strconv.Atoi(dir)
			if err != nil || n <= 1 || strconv.Itoa(n) != dir {
				return
			}
			sent = procGroup{pgid: n}
		}
		if lease <= 0 {
			return
		}
		pipe := fmt.Sprintf("freeze %s %s\nthawed %s\n", sent.Spec(), time.Duration(lease), sent.Spec())
		sc := bufio.NewScanner(strings.NewReader(pipe))
		var got []string
		for sc.Scan() {
			op, g, l, err := parseLine(sc.Text(), nil)
			if err != nil {
				t.Fatalf("%q: %v", pipe, err)
			}
			if g.Spec() != sent.Spec() || op == "freeze" && l != time.Duration(lease) {
				t.Fatalf("%q: read %s %s %v, sent %s %v", pipe, op, g.Spec(), l, sent.Spec(), time.Duration(lease))
			}
			got = append(got, op)
		}
		if strings.Join(got, " ") != "freeze thawed" {
			t.Fatalf("%q: read %v", pipe, got)
		}
	})
}
