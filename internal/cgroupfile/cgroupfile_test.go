package cgroupfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLines: v1, v2 and hybrid files read line by line; a hierarchy or a
// controller listed twice (a line forged by a cgroup name with a line
// break in it) and a line of another shape are refused, naming the line.
func TestLines(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []Line
		err        string
	}{
		{"v2", "0::/system.slice/a.service\n", []Line{{"0", "", "/system.slice/a.service"}}, ""},
		{"a zombie's", "0::/a (deleted)\n", []Line{{"0", "", "/a"}}, ""},
		{"hybrid", "4:memory,cpu:/k\n\n1:name=systemd:/s\n0::/\n", []Line{{"4", "memory,cpu", "/k"}, {"1", "name=systemd", "/s"}, {"0", "", "/"}}, ""},
		{"a colon in the path", "0::/a:b\n", []Line{{"0", "", "/a:b"}}, ""},
		{"empty", "", nil, ""},
		{"a forged unified line", "0::/x\n0::/kubepods/pod1\n", nil, "line 2: hierarchy 0 listed again (first at line 1)"},
		{"a forged controller", "4:memory:/x\n9:cpu,memory:/k\n", nil, `line 2: controller "memory" listed again (first at line 1)`},
		{"no hierarchy ID", "0::/x\nevil\n", nil, "line 2: want hierarchy-ID:controllers:path"},
		{"a bad hierarchy ID", "x::/a\n", nil, `line 1: bad hierarchy ID "x"`},
		{"a hierarchy ID written otherwise", "4:memory:/a\n04:pids:/k\n", nil, `line 2: bad hierarchy ID "04"`},
		{"a negative hierarchy ID", "-1:pids:/k\n", nil, `line 1: bad hierarchy ID "-1"`},
		// a host with the unified hierarchy alone: no other line is the kernel's
		{"a forged line of a hierarchy without controllers", "0::/x\n5::/kubepods/pod1\n", nil, `line 2: hierarchy 5 with controllers "": only the unified hierarchy, 0, has none`},
		{"a forged line after the unified one", "0::/x\n5:freezer:/kubepods/pod1\n", nil, "line 2: a line after the unified hierarchy's (line 1), which the kernel lists last"},
		{"the unified hierarchy with controllers", "0:memory:/x\n", nil, `line 1: hierarchy 0 with controllers "memory"`},
	} {
		got, err := Lines([]byte(tc.file))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, %v; want error %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: line %d %v, want %v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}

// TestUnified: the unified line's path, "" without one, an error for a
// file Lines or the host refuses.
func TestUnified(t *testing.T) {
	for file, want := range map[string]string{"4:memory:/k\n0::/u\n": "/u", "4:memory:/k\n": ""} {
		if got, err := Unified([]byte(file), nil); err != nil || got != want {
			t.Errorf("Unified(%q) = %q, %v; want %q", file, got, err, want)
		}
	}
	if got, err := Unified([]byte("0::/u\n0::/forged\n"), nil); err == nil {
		t.Errorf("a forged line: %q, want an error", got)
	}
	// a host with no cgroup2 mounted: a unified line is a forged one
	self := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(self, []byte("4:memory:/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Unified([]byte("4:memory:/k\n0::/forged\n"), NewHost(self)); err == nil {
		t.Errorf("a unified line on a legacy host: %q, want an error", got)
	}
	if got, err := Unified([]byte("4:memory:/k\n"), NewHost(self)); err != nil || got != "" {
		t.Errorf("a legacy host's file: %q, %v; want none", got, err)
	}
}

// FuzzLines: any file is read without a panic; what is accepted lists no
// hierarchy twice, no line after the unified hierarchy's, controllers on
// every other hierarchy alone, and each line of the file but the blank
// ones, in order, as written (the unified one's path may have lost its
// " (deleted)"): nothing dropped, added or carried into another line.
func FuzzLines(f *testing.F) {
	f.Add("4:memory,cpu:/k\n0::/u\n")
	f.Add("0::/x\n0::/y\n")
	f.Add("0::/x\n5::/y\n")
	f.Add(" 4:memory:/k (deleted) \r\n\n0::/a:b (deleted)\n")
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := Lines([]byte(s))
		if err != nil {
			return
		}
		var written []string
		for _, w := range strings.Split(s, "\n") {
			if w = strings.TrimSpace(w); w != "" {
				written = append(written, w)
			}
		}
		if len(lines) != len(written) {
			t.Fatalf("%q: %d lines read, %d written: %v", s, len(lines), len(written), lines)
		}
		ids := map[string]bool{}
		for i, l := range lines {
			if w := l.ID + ":" + l.Controllers + ":" + l.Path; written[i] != w && (!l.Unified() || written[i] != w+" (deleted)") {
				t.Fatalf("%q: line %d read as %v, written %q", s, i+1, l, written[i])
			}
			if ids[l.ID] || (l.ID == "0") != l.Unified() || l.ID != "0" && l.Controllers == "" || l.Unified() && i != len(lines)-1 {
				t.Fatalf("%q: %v", s, lines)
			}
			ids[l.ID] = true
		}
	})
}

// TestHostCheck: a process's unified line is refused where the exporter's
// own file has none (no cgroup2 mounted: the line is forged), taken where
// it has one, and where the own file cannot be read; the own file is read
// again while it has none, so that a cgroup2 mounted since is seen.
func TestHostCheck(t *testing.T) {
	self := filepath.Join(t.TempDir(), "cgroup")
	forged, _ := Lines([]byte("4:memory:/t.service\n1:name=systemd:/t.service/x\n0::/victim.service\n"))
	v1, _ := Lines([]byte("4:memory:/t.service\n1:name=systemd:/t.service\n"))
	h := NewHost(self)
	if err := h.Check(forged); err != nil {
		t.Errorf("own file unread: %v", err)
	}
	if err := os.WriteFile(self, []byte("4:memory:/\n1:name=systemd:/vgpu.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(forged); err == nil || !strings.Contains(err.Error(), `"0::/victim.service"`) || !strings.Contains(err.Error(), self) {
		t.Errorf("a legacy host: %v, want the forged line refused, naming it and the own file", err)
	}
	if err := h.Check(v1); err != nil {
		t.Errorf("a legacy host, no unified line: %v", err)
	}
	if err := os.WriteFile(self, []byte("4:memory:/\n1:name=systemd:/vgpu.service\n0::/vgpu.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(forged); err != nil {
		t.Errorf("cgroup2 mounted since: %v", err)
	}
	var none *Host
	if err := none.Check(forged); err != nil {
		t.Errorf("no host: %v", err)
	}
}

// TestHostCheckHierarchies: a process's file is refused where its
// hierarchies (IDs and controllers) are not the exporter's: a line of a
// hierarchy the host lacks, forged by a cgroup name with a line break in
// it on a kernel before 4.13 (on a legacy host and on a hybrid one, the
// forged line before the real unified one), or a hierarchy left out; a
// file listing the same ones is taken, in any order. A hierarchy mounted
// since the own file was first read is seen: it is read again.
func TestHostCheckHierarchies(t *testing.T) {
	const legacy = "10:memory:/\n2:cpu,cpuacct:/\n1:name=systemd:/vgpu.service\n"
	const hybrid = legacy + "0::/vgpu.service\n"
	for _, tc := range []struct {
		name, self, file string
		refused          bool
	}{
		{"legacy: the same hierarchies", legacy, "10:memory:/t\n2:cpu,cpuacct:/t\n1:name=systemd:/t/x\n", false},
		{"legacy: another order", legacy, "1:name=systemd:/t/x\n10:memory:/t\n2:cpu,cpuacct:/t\n", false},
		{"legacy: a hierarchy the host lacks", legacy, "10:memory:/t\n2:cpu,cpuacct:/t\n1:name=systemd:/t/x\n99:fake:/kubepods/burstable/pod1/c\n", true},
		{"legacy: a hierarchy with other controllers", legacy, "10:memory:/t\n2:cpu:/t\n1:name=systemd:/t/x\n", true},
		{"legacy: a hierarchy left out", legacy, "10:memory:/t\n1:name=systemd:/t/x\n", true},
		{"hybrid: the same hierarchies", hybrid, "10:memory:/t\n2:cpu,cpuacct:/t\n1:name=systemd:/t\n0::/t\n", false},
		{"hybrid: a hierarchy the host lacks before the unified line", hybrid, "10:memory:/t\n2:cpu,cpuacct:/t\n1:name=systemd:/t/x\n99:fake:/kubepods/burstable/pod1/c\n0::/t\n", true},
		{"v2: the same", "0::/vgpu.service\n", "0::/t\n", false},
	} {
		self := filepath.Join(t.TempDir(), "cgroup")
		if err := os.WriteFile(self, []byte(tc.self), 0o644); err != nil {
			t.Fatal(err)
		}
		lines, err := Lines([]byte(tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h := NewHost(self)
		for range 2 { // the own hierarchies read, then kept
			if err := h.Check(lines); tc.refused != (err != nil) || err != nil && !strings.Contains(err.Error(), self) {
				t.Errorf("%s: %v, want refused %v, naming the own file", tc.name, err, tc.refused)
			}
		}
	}
	self := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(self, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	h := NewHost(self)
	old, _ := Lines([]byte("10:memory:/t\n2:cpu,cpuacct:/t\n1:name=systemd:/t\n"))
	mounted, _ := Lines([]byte("11:pids:/t\n10:memory:/t\n2:cpu,cpuacct:/t\n1:name=systemd:/t\n"))
	if err := h.Check(old); err != nil {
		t.Fatalf("before a mount: %v", err)
	}
	if err := os.WriteFile(self, []byte("11:pids:/\n"+legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(mounted); err != nil {
		t.Errorf("a hierarchy mounted since the own file was read: %v", err)
	}
}

// TestHostLines: Host.Lines is Lines then Check: a file either refuses
// is an error (Lines' naming the line, Check's the own file), and no
// lines; one both take is its lines; a nil Host checks Lines alone.
func TestHostLines(t *testing.T) {
	self := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(self, []byte("4:memory:/\n1:name=systemd:/vgpu.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	legacy := NewHost(self)
	var none *Host
	for _, tc := range []struct {
		name  string
		host  *Host
		file  string
		want  []Line
		error string // what the error names; "" for none
	}{
		{"taken", legacy, "4:memory:/t\n1:name=systemd:/t\n", []Line{{"4", "memory", "/t"}, {"1", "name=systemd", "/t"}}, ""},
		{"refused by Lines", legacy, "4:memory:/t\n4:memory:/forged\n", nil, "line 2"},
		{"refused by Check", legacy, "4:memory:/t\n1:name=systemd:/t/x\n0::/victim.service\n", nil, self},
		{"no host: Lines alone", none, "4:memory:/t\n0::/u\n", []Line{{"4", "memory", "/t"}, {"0", "", "/u"}}, ""},
		{"no host, refused by Lines", none, "0::/u\n0::/forged\n", nil, "line 2"},
	} {
		got, err := tc.host.Lines([]byte(tc.file))
		if (tc.error == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.error) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.error)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: lines %q, want %q", tc.name, got, tc.want)
		}
	}
}
