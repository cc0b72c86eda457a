package scenarios

import (
	"errors"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// traceFile matches the files a scenario names (arrival traces).
var traceFile = regexp.MustCompile(`\bfile:\s*([^,}\s]+)`)

// Every built-in scenario is found by name, and has its companion tenants
// file and the traces it names beside it in its library.
func TestBuiltins(t *testing.T) {
	names, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"h100-timeslice", "noisy-neighbour", "diurnal-shift"} {
		if !slices.Contains(names, want) {
			t.Errorf("built-in scenarios %v lack %s", names, want)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("names not sorted: %v", names)
	}
	traces := 0
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			b, err := Find(name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			if b.Name != name {
				t.Fatalf("Find(%s.yaml) gave %s", name, b.Name)
			}
			embedded, err := fs.ReadFile(b.FS, b.Path)
			if err != nil {
				t.Fatal(err)
			}
			tp, data, err := b.Tenants()
			if err != nil || tp != b.TenantsPath() || len(data) == 0 {
				t.Fatalf("%s: companion tenants file %q (%d bytes): %v", b.Path, tp, len(data), err)
			}
			for _, m := range traceFile.FindAllSubmatch(embedded, -1) {
				trace := path.Join(path.Dir(b.Path), string(m[1]))
				if fi, err := fs.Stat(b.FS, trace); err != nil || fi.Size() == 0 {
					t.Errorf("trace %s not in the library: %v", m[1], err)
				}
				traces++
			}
		})
	}
	// diurnal-shift replays a trace; a scan that finds none checked nothing.
	if traces == 0 {
		t.Error("no built-in scenario names a trace")
	}
}

func TestFind(t *testing.T) {
	top := fstest.MapFS{
		"a.yaml":         {Data: []byte("name: a\n")},
		"a.tenants.yaml": {Data: []byte("tenants: []\n")},
		"b.yaml":         {Data: []byte("name: b\n")},
		"notes.md":       {Data: []byte("not a scenario\n")},
		"sub/deep.yaml":  {Data: []byte("name: deep\n")},
	}
	replay := fstest.MapFS{
		"replay/r.yaml":         {Data: []byte("name: r\n")},
		"replay/r.tenants.yaml": {Data: []byte("tenants: []\n")},
		"replay/r.csv":          {Data: []byte("t\n")},
		"other.yaml":            {Data: []byte("name: other\n")},
	}
	libs := []Library{{FS: top, Dir: "."}, {FS: replay, Dir: "replay"}}
	for _, tc := range []struct {
		name, libsName string
		libs           []Library
		wantPath       string // found scenario
		wantTenants    string
		wantErr        []string
		wantUnknown    bool
	}{
		{name: "a", libs: libs, wantPath: "a.yaml", wantTenants: "a.tenants.yaml"},
		{name: "a.yaml", libs: libs, wantPath: "a.yaml", wantTenants: "a.tenants.yaml"},
		{name: "b", libs: libs, wantPath: "b.yaml"},
		{name: "r", libs: libs, wantPath: "replay/r.yaml", wantTenants: "replay/r.tenants.yaml"},
		{name: "nope", libs: libs, wantUnknown: true, wantErr: []string{`"nope"`, "built-in: a, b, r)"}},
		{name: "a.tenants", libs: libs, wantUnknown: true},
		{name: "deep", libs: libs, wantUnknown: true},
		{name: "other", libs: libs, wantUnknown: true},
		{name: "../a", libs: libs, wantUnknown: true},
		{name: "", libs: libs, wantUnknown: true},
		{name: "a", libs: append(libs, Library{FS: fstest.MapFS{"x/a.yaml": {}}, Dir: "x"}),
			wantErr: []string{"built-in scenarios a.yaml and x/a.yaml have the same name"}},
		{name: "a", libs: []Library{{FS: top, Dir: "["}}, wantErr: []string{"built-in scenarios in ["}},
	} {
		b, err := Find(tc.name, tc.libs...)
		var u *UnknownError
		if errors.As(err, &u) != tc.wantUnknown {
			t.Errorf("%q: error %v, want unknown %v", tc.name, err, tc.wantUnknown)
			continue
		}
		if tc.wantUnknown {
			if u.Name != tc.name || !slices.Equal(u.Known, []string{"a", "b", "r"}) {
				t.Errorf("%q: unknown %+v", tc.name, u)
			}
		}
		if tc.wantUnknown || len(tc.wantErr) > 0 {
			if err == nil {
				t.Errorf("%q: no error", tc.name)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q: error %q lacks %q", tc.name, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.name, err)
			continue
		}
		if b.Path != tc.wantPath || b.TenantsPath() != tc.wantTenants {
			t.Errorf("%q: found %s (tenants %q), want %s (tenants %q)", tc.name, b.Path, b.TenantsPath(), tc.wantPath, tc.wantTenants)
		}
	}
}

// The default libraries are the embedded ones.
func TestListDefault(t *testing.T) {
	all, err := List()
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := List(Libraries()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(explicit) || len(all) < 7 {
		t.Fatalf("List() %d scenarios, List(Libraries()...) %d", len(all), len(explicit))
	}
	for i := range all {
		if all[i].Name != explicit[i].Name || all[i].Path != explicit[i].Path {
			t.Errorf("%d: %+v vs %+v", i, all[i], explicit[i])
		}
	}
}

// Tenants reads a scenario's companion from its library, naming it as it
// is there, and Explain names the built-in scenario.
func TestTenantsAndExplain(t *testing.T) {
	lib := fstest.MapFS{
		"replay/r.yaml":         {Data: []byte("name: r\n")},
		"replay/r.tenants.yaml": {Data: []byte("tenants: []\n")},
		"replay/alone.yaml":     {Data: []byte("name: alone\n")},
	}
	r, err := Find("r", Library{FS: lib, Dir: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	if name, data, err := r.Tenants(); err != nil || name != "replay/r.tenants.yaml" || string(data) != "tenants: []\n" {
		t.Errorf("Tenants: %q %q %v", name, data, err)
	}
	alone, err := Find("alone", Library{FS: lib, Dir: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	if name, data, err := alone.Tenants(); err != nil || name != "" || data != nil {
		t.Errorf("Tenants of a scenario without one: %q %q %v", name, data, err)
	}
	inner := errors.New("replay/r.yaml:3: arrival: trace replay/r.csv: bad row")
	got := r.Explain(inner)
	if want := "built-in scenario r: replay/r.yaml:3: arrival: trace replay/r.csv: bad row"; got.Error() != want || !errors.Is(got, inner) {
		t.Errorf("Explain:\n got %q\nwant %q (wrapping the error)", got, want)
	}
}
