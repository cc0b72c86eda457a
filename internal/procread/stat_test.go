package procread

import (
	"os"
	"strconv"
	"testing"
)

func TestStartTime(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want string
		ok   bool
	}{
		{"13 (sh) S 1 130 130 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1013 0 0\n", "1013", true},
		{"42 (a) b) (c) R 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 8 9", "777", true},
		{"42 (x) R 1 42 42", "", false},
		{"42 x R 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777", "", false},
		{"42 (x) R 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0", "", false},
		{"", "", false},
	} {
		got, ok := StartTime([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("StartTime(%q) = %q, %v; want %q, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
	// this machine's own /proc
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if _, ok := StartTime(b); !ok {
			t.Errorf("/proc/self/stat %q: no start time", b)
		}
	}
}

func FuzzStartTime(f *testing.F) {
	f.Add([]byte("13 (sh) S 1 130 130 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1013 0 0\n"))
	f.Add([]byte("42 (a) b) (c) R 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 8 9"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := StartTime(b)
		if ok {
			if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				t.Fatalf("start time %q is not a number", s)
			}
		}
	})
}

func TestParentPID(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want uint32
		ok   bool
	}{
		{"13 (sh) S 1 130 130 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1013 0 0\n", 1, true},
		{"42 (a) 7) (c) R 4242 42 42 0", 4242, true},
		{"42 (x) R", 0, false},
		{"42 x R 5 42", 0, false},
		{"42 (x) R -5 42", 0, false},
		{"42 (x) R 99999999999 42", 0, false},
		{"", 0, false},
	} {
		got, ok := ParentPID([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParentPID(%q) = %d, %v; want %d, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if got, ok := ParentPID(b); !ok || int(got) != os.Getppid() {
			t.Errorf("/proc/self/stat %q: parent %d, %v; want %d", b, got, ok, os.Getppid())
		}
	}
}
