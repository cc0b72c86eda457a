package sim

import (
	"strings"
	"testing"
)

// TestEventAndUIDChecked: an event without at (which ran at the start),
// one later than a run can last (accepted, and never came) and a uid that is no user ID (-1 ran as a process of user -1) are
// refused at their line; the same scenarios with at: 0s and a valid uid
// load.
func TestEventAndUIDChecked(t *testing.T) {
	const head = "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n"
	const dnn = "workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}"
	for _, c := range []struct {
		name, src, want string
	}{
		{"event without at", head + "  - {name: a, " + dnn + "}\nevents:\n  - {tenant: a, rate: 5}\n", "x.yaml:7: an event needs at: its time from the start"},
		{"action without at", head + "  - {name: a, " + dnn + "}\nevents:\n  - {at: 1s, tenant: a, action: stop}\n  - {tenant: a, action: start}\n", "x.yaml:8: an event needs at"},
		{"event at 0s", head + "  - {name: a, " + dnn + "}\nevents:\n  - {at: 0s, tenant: a, rate: 5}\n", ""},
		{"event past a run's longest", head + "  - {name: a, " + dnn + "}\nevents:\n  - {at: 2562047h47m16s, tenant: a, rate: 3}\n", "x.yaml:7: at must be in [0, 168h0m0s], got 2562047h47m16s"},
		{"event at a run's longest", head + "  - {name: a, " + dnn + "}\nevents:\n  - {at: 168h, tenant: a, rate: 3}\n", ""},
		{"negative uid", head + "  - {name: a, process: {uid: -1}, " + dnn + "}\n", "x.yaml:5: uid must be a user ID in [0, 4294967294], got -1"},
		{"uid past uid_t", head + "  - {name: a, process: {uid: 4294967295}, " + dnn + "}\n", "x.yaml:5: uid must be a user ID"},
		{"uid 0", head + "  - {name: a, process: {uid: 0}, " + dnn + "}\n", ""},
		{"largest uid", head + "  - {name: a, process: {uid: 4294967294}, " + dnn + "}\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) { wantParse(t, c.src, c.want) })
	}
}

// TestOneDocument: a scenario file holds one YAML document; a second one
// (two scenarios in a file, a stray ---) was ignored whatever it held, an
// unknown key or a syntax error included. A leading --- and a closing ...
// are one document.
func TestOneDocument(t *testing.T) {
	const sc = "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n  - {name: a, workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}}\n"
	for _, c := range []struct{ name, src, want string }{
		{"second scenario", sc + "---\nname: y\nfoo: 1\n", "x.yaml:6: only one YAML document is allowed (a second starts here)"},
		{"stray separator", sc + "---\n", "x.yaml:6: only one YAML document is allowed"},
		{"bad second document", sc + "---\nfoo: [\n", "x.yaml:7: did not find expected node content"},
		{"leading separator", "---\n" + sc, ""},
		{"closing marker", sc + "...\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("x.yaml", []byte(c.src))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%v, want it to load", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}

// TestPodUIDChecked: a process's pod_uid is a pod UID as a tenants file's
// kubernetes.pod_uid takes it (8-4-4-4-12 hex digits, or 32), or it is
// refused at its line (any text went into the cgroup path, and a pod_uid
// selector could never match it); one in upper case is read in the
// kubelet's lower case.
func TestPodUIDChecked(t *testing.T) {
	const head = "name: x\ngpus:\n  - {model: H100-SXM5-80GB}\ntenants:\n"
	const dnn = "workload: {type: dnn, flops: 1e9, arrival: {process: poisson, rate: 1}}"
	for _, c := range []struct {
		name, uid, want, cgroup string
	}{
		{"uuid", "5b1e7c42-0a9d-4c3e-9f16-2d8b4a7e6c01", "", "pod5b1e7c42_0a9d_4c3e_9f16_2d8b4a7e6c01.slice"},
		{"upper case", "5B1E7C42-0A9D-4C3E-9F16-2D8B4A7E6C01", "", "pod5b1e7c42_0a9d_4c3e_9f16_2d8b4a7e6c01.slice"},
		{"static pod", "0123456789abcdef0123456789ABCDEF", "", "pod0123456789abcdef0123456789abcdef.slice"},
		{"text", "my-pod", `x.yaml:5: pod_uid "my-pod" is not a pod UID (8-4-4-4-12 hex digits, or 32 of a static pod)`, ""},
		{"path", "../../etc", `x.yaml:5: pod_uid "../../etc" is not a pod UID`, ""},
		{"underscores", "5b1e7c42_0a9d_4c3e_9f16_2d8b4a7e6c01", "is not a pod UID", ""},
		{"too long", "5b1e7c42-0a9d-4c3e-9f16-2d8b4a7e6c010", "is not a pod UID", ""},
		{"not hex", "5b1e7c42-0a9d-4c3e-9f16-2d8b4a7e6cxx", "is not a pod UID", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := head + "  - {name: a, process: {pod_uid: \"" + c.uid + "\"}, " + dnn + "}\n"
			sc, err := ParseScenario("x.yaml", []byte(src))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%v, want it to load", err)
			case c.want == "" && !strings.Contains(sc.Tenants[0].Process.Cgroup, "-"+c.cgroup+"/"):
				t.Errorf("cgroup %s, want its pod segment %s", sc.Tenants[0].Process.Cgroup, c.cgroup)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}

// wantParse fails t unless ParseScenario of src (as x.yaml) loads, for a
// want of "", or fails with an error holding want.
func wantParse(t *testing.T, src, want string) {
	t.Helper()
	_, err := ParseScenario("x.yaml", []byte(src))
	switch {
	case want == "" && err != nil:
		t.Errorf("%.300s\n%v, want it to load", src, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%.300s\n%v, want %q", src, err, want)
	}
}
