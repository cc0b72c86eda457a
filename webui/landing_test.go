package webui

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

func TestLanding(t *testing.T) {
	links := []web.LandingLinks{{Address: "/metrics", Text: "Metrics"}, {Address: "/tuner", Text: "Tuner"}}
	tests := []struct {
		name      string
		about     *About
		want, not []string
	}{
		{"simulated, recommending", &About{Backend: "sim", Simulated: true, Scenario: "h100-timeslice", TunerMode: "recommend", TunerPolicy: "autotune",
			Tenants: []string{"llm", "batch"}, Sampled: true},
			[]string{`id="simulated"`, "scenario <code>h100-timeslice</code>", "sim (simulated)", "recommend: the tuner decides and shows what it would change, and changes nothing (policy autotune)",
				"2: <code>llm</code>, <code>batch</code>", `href="/tuner"`, `href="/metrics"`}, nil},
		{"real GPUs, tuner off, no tenants", &About{Backend: "nvml", TunerMode: "off", Sampled: true},
			[]string{"<td>nvml</td>", "off (no tuner runs): the exporter measures and changes nothing", "none configured"}, []string{`id="simulated"`, "Simulated data", "decides"}},
		{"before the first sample", &About{Backend: "nvml", TunerMode: "enforce"},
			[]string{"no sample yet", "enforce: the tuner changes the GPUs' settings and restores them at exit"}, nil},
		{"enforce, the kill switch engaged", &About{Backend: "nvml", TunerMode: "enforce", KillSwitch: true, Sampled: true},
			[]string{"enforce: kill switch on: the tuner changes nothing (reverts excepted)"}, []string{"changes the GPUs' settings"}},
		{"enforce on one GPU, the kill switch engaged", &About{Backend: "nvml", TunerMode: "recommend", TunerGPUModes: map[string]string{"0": "enforce"}, KillSwitch: true, Sampled: true},
			[]string{"enforce on GPU 0, recommend elsewhere (as flagged): where it enforces, kill switch on: the tuner changes nothing (reverts excepted); where it recommends"},
			[]string{"changes the GPUs' settings"}},
		{"names escaped", &About{Backend: "sim", Simulated: true, Scenario: "<b>x</b>", TunerMode: "off", Tenants: []string{"<script>"}, Sampled: true},
			[]string{"&lt;b&gt;x&lt;/b&gt;", "&lt;script&gt;"}, []string{"<script>", "<b>x</b>"}},
		{"no state", nil, []string{`href="/metrics"`}, []string{`id="about"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := LandingOptions{Links: links}
			if tc.about != nil {
				a := *tc.about
				o.About = func() About { return a }
			}
			h, err := NewLanding(o)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != 200 {
				t.Fatalf("status %d", rec.Code)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(body), n) {
					t.Errorf("page has %q", n)
				}
			}
		})
	}
}

// The tuner's mode is said from the host's and the GPUs' own
// (--tuner.gpu-mode): a GPU in enforce is never hidden behind the host's
// off, and off with no GPU of a mode of its own is no tuner at all. Once
// the GPUs are read it is the mode the tuner applies to each (a GPU named
// by index and by UUID, in two modes, runs the safer; a key naming no GPU
// read applies to none, and is said to; "elsewhere" only where a GPU no
// key names is left); before, the flags', said to be.
func TestLandingTunerModes(t *testing.T) {
	const enforces = "where it enforces, the tuner changes the GPUs' settings and restores them at exit"
	for _, tc := range []struct {
		name      string
		host      string
		gpus      map[string]string
		read      int    // the GPUs the latest snapshot lists, GPU-aa, GPU-ab, ...; 0: no snapshot yet
		modes     string // About.TunerModes
		page      string // the landing page's row
		notOnPage string
	}{
		{"no tuner", "off", nil, 0, "off (no tuner runs)",
			"off (no tuner runs): the exporter measures and changes nothing", "decides"},
		{"no tuner, GPUs read", "off", nil, 2, "off (no tuner runs)",
			"off (no tuner runs): the exporter measures and changes nothing", "decides"},
		{"recommend", "recommend", nil, 0, "recommend", "recommend: the tuner decides and shows what it would change, and changes nothing", "flagged"},
		{"recommend, GPUs read", "recommend", nil, 2, "recommend", "recommend: the tuner decides and shows what it would change, and changes nothing", ""},
		{"enforce on one GPU as flagged", "off", map[string]string{"0": "enforce"}, 0, "enforce on GPU 0, off elsewhere (as flagged)",
			"enforce on GPU 0, off elsewhere (as flagged): " + enforces + "; where it is off, it changes nothing", "no tuner"},
		{"three modes as flagged, by index and UUID", "enforce", map[string]string{"3": "recommend", "10": "recommend", "GPU-ab": "off", "0": "enforce"}, 0,
			"recommend on GPU 3 and GPU 10, off on GPU-ab, enforce elsewhere (as flagged)", "recommend on GPU 3 and GPU 10, off on GPU-ab, enforce elsewhere (as flagged): " + enforces, ""},
		{"a GPU given the host's mode, as flagged", "enforce", map[string]string{"0": "enforce"}, 0, "enforce",
			"enforce: the tuner changes the GPUs' settings and restores them at exit", "elsewhere"},
		{"enforce on one GPU, off elsewhere", "off", map[string]string{"0": "enforce"}, 2, "enforce on GPU 0, off elsewhere",
			"enforce on GPU 0, off elsewhere: " + enforces + "; where it is off, it changes nothing", "flagged"},
		{"enforce on one GPU, recommend elsewhere", "recommend", map[string]string{"0": "enforce"}, 2, "enforce on GPU 0, recommend elsewhere",
			"enforce on GPU 0, recommend elsewhere: " + enforces + "; where it recommends, it shows what it would change, and changes nothing", ""},
		{"three modes, by index and UUID", "enforce", map[string]string{"3": "recommend", "10": "recommend", "GPU-ab": "off", "0": "enforce"}, 12,
			"recommend on GPU 3 and GPU 10, off on GPU 1, enforce elsewhere", "recommend on GPU 3 and GPU 10, off on GPU 1, enforce elsewhere: " + enforces, ""},
		{"a GPU named twice, enforce and off: off", "off", map[string]string{"0": "enforce", "GPU-aa": "off"}, 2, "off",
			"off: the tuner runs and changes nothing on any GPU", "enforce"},
		{"a GPU named twice, enforce and recommend: recommend", "off", map[string]string{"GPU-aa": "enforce", "0": "recommend"}, 2, "recommend on GPU 0, off elsewhere",
			"recommend on GPU 0, off elsewhere: where it recommends, it shows what it would change, and changes nothing; where it is off, it changes nothing", "enforce"},
		{"a key naming no GPU", "off", map[string]string{"7": "enforce"}, 2, "off; GPU 7: no such GPU",
			"off; GPU 7: no such GPU: the tuner runs and changes nothing on any GPU", "enforces"},
		{"keys naming no GPU beside one that does", "recommend", map[string]string{"GPU-zz": "off", "0": "enforce", "9": "off"}, 2,
			"enforce on GPU 0, recommend elsewhere; GPU 9 and GPU-zz: no such GPU", "enforce on GPU 0, recommend elsewhere; GPU 9 and GPU-zz: no such GPU: " + enforces, "it is off"},
		{"every GPU named, one mode", "off", map[string]string{"0": "enforce", "GPU-ab": "enforce"}, 2, "enforce",
			"enforce: the tuner changes the GPUs' settings and restores them at exit", "elsewhere"},
		{"every GPU named, two modes", "off", map[string]string{"0": "enforce", "1": "recommend"}, 2, "enforce on GPU 0, recommend on GPU 1",
			"enforce on GPU 0, recommend on GPU 1: " + enforces + "; where it recommends", "elsewhere"},
		{"a GPU named in the host's mode beside GPUs left over", "recommend", map[string]string{"0": "enforce", "1": "recommend"}, 3,
			"enforce on GPU 0, recommend elsewhere", "enforce on GPU 0, recommend elsewhere: " + enforces, "on GPU 1"},
		{"off on every GPU, a tuner running", "off", map[string]string{"0": "off"}, 2, "off", "off: the tuner runs and changes nothing on any GPU", "no tuner"},
	} {
		st := &tuner.Status{Mode: tuner.Mode(tc.host), GPUModes: map[string]tuner.Mode{}}
		for g, m := range tc.gpus {
			st.GPUModes[g] = tuner.Mode(m)
		}
		var snap *tenant.Snapshot
		if tc.read > 0 {
			snap = &tenant.Snapshot{Readings: &gpu.Readings{}}
			for i := range tc.read {
				snap.Readings.Devices = append(snap.Readings.Devices, gpu.Device{Index: i, UUID: "GPU-a" + string(rune('a'+i))})
			}
		}
		a := About{Backend: "nvml", TunerMode: tc.host, TunerGPUModes: tc.gpus, TunerGPUs: TunerGPUsOf(st, snap), Sampled: true}
		if got := a.TunerModes(); got != tc.modes {
			t.Errorf("%s: TunerModes %q, want %q", tc.name, got, tc.modes)
		}
		h, err := NewLanding(LandingOptions{About: func() About { return a }})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		body := rec.Body.String()
		if !strings.Contains(body, "<td>Tuner mode</td><td>"+tc.page) || (tc.notOnPage != "" && strings.Contains(body, tc.notOnPage)) {
			t.Errorf("%s: the page's tuner mode is not %q (nor without %q):\n%s", tc.name, tc.page, tc.notOnPage, body)
		}
	}
}

// The state is read at each request: a reload's tenants show at once.
func TestLandingIsLive(t *testing.T) {
	tenants := []string{"a"}
	h, err := NewLanding(LandingOptions{About: func() About {
		return About{Backend: "nvml", TunerMode: "off", Tenants: tenants, Sampled: true}
	}})
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec.Body.String()
	}
	if !strings.Contains(get(), "1: <code>a</code>") {
		t.Fatal("first tenant list missing")
	}
	tenants = []string{"a", "b"}
	if !strings.Contains(get(), "2: <code>a</code>, <code>b</code>") {
		t.Error("the page did not follow the new tenants")
	}
}

// Requests render the page at once, each from the links it was given:
// the toolkit's page builder rewrites the links it is passed (their
// leading '/'), which, on the one slice every request shared, was a data
// race between two visitors of the landing page, and changed the caller's
// links.
func TestLandingConcurrentRequests(t *testing.T) {
	links := []web.LandingLinks{{Address: "/metrics", Text: "Metrics"}, {Address: "/tuner", Text: "Tuner"}}
	h, err := NewLanding(LandingOptions{Links: links, About: func() About {
		return About{Backend: "sim", Simulated: true, TunerMode: "enforce", Sampled: true}
	}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), `href="/metrics"`) {
					t.Errorf("status %d, page %.200q", rec.Code, rec.Body.String())
					return
				}
			}
		})
	}
	wg.Wait()
	if links[0].Address != "/metrics" || links[1].Address != "/tuner" {
		t.Errorf("the caller's links were changed: %+v", links)
	}
}
