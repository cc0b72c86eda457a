package webui

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
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
// off, and off with no GPU of a mode of its own is no tuner at all.
func TestLandingTunerModes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		host      string
		gpus      map[string]string
		modes     string // About.TunerModes, the serving line's tuner_mode
		page      string // the landing page's row
		notOnPage string
	}{
		{"no tuner", "off", nil, "off (no tuner runs)",
			"off (no tuner runs): the exporter measures and changes nothing", "decides"},
		{"enforce on one GPU, off elsewhere", "off", map[string]string{"0": "enforce"}, "enforce on GPU 0, off elsewhere",
			"enforce on GPU 0, off elsewhere: where it enforces, the tuner changes the GPUs' settings and restores them at exit; where it is off, it changes nothing", "no tuner"},
		{"enforce on one GPU, recommend elsewhere", "recommend", map[string]string{"0": "enforce"}, "enforce on GPU 0, recommend elsewhere",
			"enforce on GPU 0, recommend elsewhere: where it enforces, the tuner changes the GPUs' settings and restores them at exit; where it recommends, it shows what it would change, and changes nothing", ""},
		{"three modes, by index and UUID", "enforce", map[string]string{"3": "recommend", "10": "recommend", "GPU-ab": "off", "0": "enforce"},
			"recommend on GPU 3 and GPU 10, off on GPU-ab, enforce elsewhere", "recommend on GPU 3 and GPU 10, off on GPU-ab, enforce elsewhere: where it enforces", ""},
		{"a GPU given the host's mode", "enforce", map[string]string{"0": "enforce"}, "enforce",
			"enforce: the tuner changes the GPUs' settings and restores them at exit", "elsewhere"},
		{"recommend", "recommend", nil, "recommend", "recommend: the tuner decides and shows what it would change, and changes nothing", ""},
		{"off on every GPU, a tuner running", "off", map[string]string{"0": "off"}, "off", "off: the tuner runs and changes nothing on any GPU", "no tuner"},
	} {
		a := About{Backend: "nvml", TunerMode: tc.host, TunerGPUModes: tc.gpus, Sampled: true}
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
