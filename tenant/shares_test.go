package tenant

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

const shareTenants = `tenants:
  - name: a
    selectors: [{executable: a}]
    share: {min: 0.6}
  - name: b
    selectors: [{executable: b}]
    share: {min: 0.6, max: 0.9}
  - name: c
    selectors: [{executable: c}]
    share: {min: 0.3}
  - name: d
    selectors: [{executable: d}]
  - name: e
    selectors: [{executable: e}]
    share: {max: 0.75}
  - name: g1
    selectors: [{executable: g1}]
    share: {min: 0.34}
  - name: g2
    selectors: [{executable: g2}]
    share: {min: 0.56}
  - name: g3
    selectors: [{executable: g3}]
    share: {min: 0.1}
  - name: h
    selectors: [{executable: h}]
    share: {min: 0.0002}
  - name: m1
    selectors: [{mig_uuid: MIG-1}]
    share: {min: 0.7}
  - name: m2
    selectors: [{mig_uuid: MIG-2}]
    share: {min: 0.7}
`

// sharedDev is a time-sliced GPU with one process per executable name.
func sharedDev(idx int, uuid string, exes ...string) gpu.Device {
	d := gpu.Device{Index: idx, UUID: uuid, Up: true, Mode: gpu.SharingTimeSlice}
	for i, exe := range exes {
		p := testutil.MIGProc(uint32(100*idx+i+1), exe, -1)
		p.UsedMemoryBytes = gpu.Uint(gib)
		d.Processes = append(d.Processes, p)
	}
	return d
}

// migDev has instance 1 (MIG-1) and 2 (MIG-2) with no processes, and
// instance 3 with one process per executable name.
func migDev(idx int, uuid string, exes ...string) gpu.Device {
	d := gpu.Device{Index: idx, UUID: uuid, Up: true, Mode: gpu.SharingMIG, MIGEnabled: true,
		MIG: []gpu.MIGInstance{
			{UUID: "MIG-1", GPUInstanceID: 1, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}},
			{UUID: "MIG-2", GPUInstanceID: 2, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}},
			{UUID: "MIG-3", GPUInstanceID: 3, Activity: gpu.Activity{SMActive: gpu.Float(0.5)}},
		}}
	for i, exe := range exes {
		p := testutil.MIGProc(uint32(100*idx+i+1), exe, 3)
		p.UsedMemoryBytes = gpu.Uint(gib)
		d.Processes = append(d.Processes, p)
	}
	return d
}

func TestShareMinSums(t *testing.T) {
	tests := []struct {
		name string
		devs []gpu.Device
		all  []ShareMinSum
		over []ShareMinSum
	}{
		{"over-committed GPU and a sound one",
			[]gpu.Device{sharedDev(0, "GPU-0", "a", "b", "d"), sharedDev(1, "GPU-1", "c", "d", "e")},
			[]ShareMinSum{{0, "GPU-0", "", []string{"a", "b"}, 1.2}, {1, "GPU-1", "", []string{"c"}, 0.3}},
			[]ShareMinSum{{0, "GPU-0", "", []string{"a", "b"}, 1.2}}},
		// the same guarantees spread over two GPUs: 1.2 in all, sound on
		// each (0.6+0.3 is 0.8999999999999999 in floating point)
		{"spread over GPUs",
			[]gpu.Device{sharedDev(0, "GPU-0", "a", "c"), sharedDev(1, "GPU-1", "b")},
			[]ShareMinSum{{0, "GPU-0", "", []string{"a", "c"}, 0.9}, {1, "GPU-1", "", []string{"b"}, 0.6}},
			nil},
		// 0.34+0.56+0.1, added in tenant order, is 1.0000000000000002 in
		// floating point: exactly 1, served as 1 (an alert on "> 1" fires
		// above it) and not over-committed
		{"sum of exactly one",
			[]gpu.Device{sharedDev(0, "GPU-0", "g3", "g2", "g1")},
			[]ShareMinSum{{0, "GPU-0", "", []string{"g1", "g2", "g3"}, 1}},
			nil},
		// 0.3+0.34+0.56 is 1.2000000000000002 in floating point
		{"over-committed sum served to the decimal",
			[]gpu.Device{sharedDev(0, "GPU-0", "g1", "g2", "c")},
			[]ShareMinSum{{0, "GPU-0", "", []string{"c", "g1", "g2"}, 1.2}},
			[]ShareMinSum{{0, "GPU-0", "", []string{"c", "g1", "g2"}, 1.2}}},
		{"no tenant with a minimum",
			[]gpu.Device{sharedDev(0, "GPU-0", "d", "e", "unknown")},
			nil, nil},
		{"unassigned usage does not count",
			[]gpu.Device{sharedDev(0, "GPU-0", "unknown", "other")},
			nil, nil},
		{"two processes of one tenant count once",
			[]gpu.Device{sharedDev(0, "GPU-0", "a", "a")},
			[]ShareMinSum{{0, "GPU-0", "", []string{"a"}, 0.6}},
			nil},
		// m1 and m2 own instances 1 and 2 (0.7 each, 1.4 on the GPU) but
		// each instance is its own share domain; a and b share instance 3
		{"MIG instances are separate domains",
			[]gpu.Device{migDev(0, "GPU-0", "a", "b")},
			[]ShareMinSum{{0, "GPU-0", "1", []string{"m1"}, 0.7}, {0, "GPU-0", "2", []string{"m2"}, 0.7}, {0, "GPU-0", "3", []string{"a", "b"}, 1.2}},
			[]ShareMinSum{{0, "GPU-0", "3", []string{"a", "b"}, 1.2}}},
		{"MIG instance with one tenant",
			[]gpu.Device{migDev(2, "GPU-2", "c")},
			[]ShareMinSum{{2, "GPU-2", "1", []string{"m1"}, 0.7}, {2, "GPU-2", "2", []string{"m2"}, 0.7}, {2, "GPU-2", "3", []string{"c"}, 0.3}},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBuilder(t, shareTenants, BuilderOptions{})
			s := b.Build(&gpu.Readings{Devices: tc.devs}, gpu.SamplerStats{})
			if got := s.Attribution.ShareMinSums; !equalSums(got, tc.all) {
				t.Errorf("ShareMinSums\n got %+v\nwant %+v", got, tc.all)
			}
			if got := s.Attribution.OvercommittedShares; !equalSums(got, tc.over) {
				t.Errorf("OvercommittedShares\n got %+v\nwant %+v", got, tc.over)
			}
		})
	}
}

// equalSums compares sums exactly: MinSum is the float nearest to the
// decimal, which is what the gauge serves and alerts compare with 1.
func equalSums(got, want []ShareMinSum) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.GPU != w.GPU || g.UUID != w.UUID || g.GPUInstance != w.GPUInstance || !reflect.DeepEqual(g.Tenants, w.Tenants) || g.MinSum != w.MinSum {
			return false
		}
	}
	return true
}

func TestShareOvercommitLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	b, file := fileBuilder(t, shareTenants, BuilderOptions{Logger: log.NewLogfmtLogger(log.NewSyncWriter(&buf))})
	const msg = "add up to more than 1"
	steps := []struct {
		name string
		devs []gpu.Device
		// lines with msg the step adds, and what each must contain
		logs int
		want []string
	}{
		{"first over-commitment", []gpu.Device{sharedDev(0, "GPU-0", "a", "b"), sharedDev(1, "GPU-1", "c")}, 1,
			[]string{"level=warn", "gpu=0", "uuid=GPU-0", "tenants=a,b", "min_sum=1.2"}},
		{"same again", []gpu.Device{sharedDev(0, "GPU-0", "a", "b"), sharedDev(1, "GPU-1", "c")}, 0, nil},
		{"same again, other order", []gpu.Device{sharedDev(0, "GPU-0", "b", "a", "d")}, 0, nil},
		{"another set of tenants on the GPU", []gpu.Device{sharedDev(0, "GPU-0", "a", "b", "c")}, 1,
			[]string{"uuid=GPU-0", "tenants=a,b,c", "min_sum=1.5"}},
		{"the same set on another GPU", []gpu.Device{sharedDev(1, "GPU-1", "a", "b")}, 1,
			[]string{"gpu=1", "uuid=GPU-1", "tenants=a,b"}},
		{"a MIG instance", []gpu.Device{migDev(0, "GPU-0", "a", "b")}, 1,
			[]string{"uuid=GPU-0", "gpu_instance=3", "tenants=a,b"}},
		{"sound", []gpu.Device{sharedDev(0, "GPU-0", "a", "c")}, 0, nil},
		// logged as the sum is served, not to four digits ("1")
		{"over by a little", []gpu.Device{sharedDev(0, "GPU-0", "a", "c", "g3", "h")}, 1,
			[]string{"tenants=a,c,g3,h", "min_sum=1.0002"}},
	}
	for _, st := range steps {
		before := buf.Len()
		b.Build(&gpu.Readings{Devices: st.devs}, gpu.SamplerStats{})
		added := buf.String()[before:]
		if n := strings.Count(added, msg); n != st.logs {
			t.Fatalf("%s: %d log lines, want %d:\n%s", st.name, n, st.logs, added)
		}
		for _, w := range st.want {
			if !strings.Contains(added, w) {
				t.Errorf("%s: log lacks %q:\n%s", st.name, w, added)
			}
		}
	}
	// a reload may change the minimums: over-commitments are logged anew
	// (a reload of the file unchanged changes nothing, and logs none)
	for _, edit := range []struct {
		name string
		file string
		logs int
	}{
		{"unchanged", shareTenants, 0},
		{"b's minimum changed", strings.Replace(shareTenants, "{min: 0.6, max: 0.9}", "{min: 0.7, max: 0.9}", 1), 1},
	} {
		if err := os.WriteFile(file, []byte(edit.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(file); err != nil {
			t.Fatal(err)
		}
		before := buf.Len()
		b.Build(&gpu.Readings{Devices: []gpu.Device{sharedDev(0, "GPU-0", "a", "b")}}, gpu.SamplerStats{})
		if n := strings.Count(buf.String()[before:], msg); n != edit.logs {
			t.Errorf("after a reload of the file %s: %d log lines, want %d:\n%s", edit.name, n, edit.logs, buf.String()[before:])
		}
	}
}
