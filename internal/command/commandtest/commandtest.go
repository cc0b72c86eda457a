// Package commandtest writes fake programs for tests of code that runs
// outside tools: small shell scripts in a test's temporary directory that
// record their arguments and stdin and answer like the real tool would
// (or fail, print garbage, or hang).
package commandtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Fake is a fake program's directory: scripts written into it record each
// call in Dir/NAME.calls (one line of arguments per call, separated by
// tabs) and Dir/NAME.stdin (all stdin, in call order).
type Fake struct {
	Dir string
}

// New returns a Fake in a new temporary directory of t.
func New(t testing.TB) *Fake {
	t.Helper()
	return &Fake{Dir: t.TempDir()}
}

// Script writes an executable NAME whose body (POSIX sh) runs after the
// call was recorded; the body sees the arguments as "$@" and the recorded
// stdin in the file "$STDIN". It returns the program's path.
func (f *Fake) Script(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(f.Dir, name)
	script := "#!/bin/sh\n" +
		"D='" + f.Dir + "'\n" +
		"STDIN=\"$D/" + name + ".last-stdin\"\n" +
		"cat > \"$STDIN\"\n" +
		"cat \"$STDIN\" >> \"$D/" + name + ".stdin\"\n" +
		"( first=1; for a in \"$@\"; do if [ $first = 1 ]; then first=0; else printf '\\t'; fi; printf '%s' \"$a\"; done; echo ) >> \"$D/" + name + ".calls\"\n" +
		body + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Calls returns the recorded calls of NAME, each as its argument list.
func (f *Fake) Calls(t testing.TB, name string) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.Dir, name+".calls"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		calls = append(calls, strings.Split(l, "\t"))
	}
	return calls
}

// Stdin returns everything NAME read on stdin, all calls together.
func (f *Fake) Stdin(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.Dir, name+".stdin"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// OnPath puts the fake directory first on PATH for the rest of the test.
func (f *Fake) OnPath(t *testing.T) {
	t.Setenv("PATH", f.Dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// Alive reports whether process pid runs (a zombie, dead but not yet
// reaped by an init that does not reap, counts as gone).
func Alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
