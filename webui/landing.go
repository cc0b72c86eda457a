// Package webui holds the exporter's pages for people (as opposed to
// Prometheus): the landing page, which says what the exporter serves, from
// which backend and with what tuner mode, and links the rest; and the
// tuner page (/tuner), the latest tenant snapshot and tuner status joined
// into one view. It reads what it is given (the wiring passes functions
// that return the latest snapshot and status) and calls no backend.
package webui

import (
	"cmp"
	"fmt"
	"html"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
)

// About is the state the landing page shows, read at each request.
type About struct {
	// Backend is the readings' backend ("nvml", "sim").
	Backend string
	// Simulated is true when the GPUs are the built-in simulator's;
	// Scenario names its scenario.
	Simulated bool
	Scenario  string
	// TunerMode is the host's tuner mode ("off", "recommend",
	// "enforce"), TunerGPUModes the GPUs' own (--tuner.gpu-mode, by index
	// or UUID); TunerPolicy the policy the tuner runs ("" when none
	// runs). No tuner runs where the host's mode is off and no GPU has
	// one of its own.
	TunerMode     string
	TunerGPUModes map[string]string
	TunerPolicy   string
	// Tenants are the tenants of the latest snapshot; Sampled is false
	// before the first one.
	Tenants []string
	Sampled bool
}

// LandingOptions configure the landing page.
type LandingOptions struct {
	// Links are the pages and endpoints listed, in order.
	Links []web.LandingLinks
	// About returns the state to show; nil shows none.
	About  func() About
	Logger log.Logger
}

// landing serves the landing page, rendered at each request so that the
// tenants and mode it shows are the current ones.
type landing struct{ o LandingOptions }

// NewLanding returns the landing page handler. The configuration is
// checked once here: a page that cannot render is an error at start.
func NewLanding(o LandingOptions) (http.Handler, error) {
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	l := landing{o: o}
	if _, err := l.page(); err != nil {
		return nil, fmt.Errorf("landing page: %w", err)
	}
	return l, nil
}

func (l landing) page() (http.Handler, error) {
	var a About
	if l.o.About != nil {
		a = l.o.About()
	}
	return web.NewLandingPage(web.LandingConfig{
		Name:        "vgpu_exporter",
		Description: "Prometheus exporter of what each tenant gets from shared GPUs (MIG, MPS, time-slicing, vGPU)",
		Version:     version.Info(),
		// No /debug/pprof handlers are served, so no links to them.
		Profiling: "false",
		// A copy for each page: the toolkit rewrites the links it is
		// given, and requests render at once.
		Links:     slices.Clone(l.o.Links),
		ExtraHTML: aboutHTML(a),
		ExtraCSS:  "table.about td { padding: 0.15em 0.8em 0.15em 0; } .simulated { background: #fff4d6; padding: 0.4em 0.7em; border: 1px solid #e0c060; display: inline-block; }",
	})
}

func (l landing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, err := l.page()
	if err != nil {
		level.Error(l.o.Logger).Log("msg", "rendering the landing page", "err", err)
		http.Error(w, "rendering the landing page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.ServeHTTP(w, r)
}

// aboutHTML renders the state as a small table, every value escaped.
func aboutHTML(a About) string {
	if a.Backend == "" {
		return ""
	}
	e := html.EscapeString
	var b strings.Builder
	if a.Simulated {
		fmt.Fprintf(&b, `<p class="simulated" id="simulated">Simulated data: these GPUs are the built-in simulator's (scenario <code>%s</code>), not real hardware.</p>`, e(a.Scenario))
	}
	b.WriteString(`<table class="about" id="about">`)
	row := func(k, v string) { fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>", e(k), v) }
	backend := e(a.Backend)
	if a.Simulated {
		backend += " (simulated)"
	}
	row("Backend", backend)
	mode := e(a.TunerModes())
	if t := tunerModesText(a); t != "" {
		mode += ": " + t
	}
	if a.TunerPolicy != "" {
		mode += " (policy " + e(a.TunerPolicy) + ")"
	}
	row("Tuner mode", mode)
	switch {
	case !a.Sampled:
		row("Tenants", "no sample yet")
	case len(a.Tenants) == 0:
		row("Tenants", "none configured: all usage is <code>unassigned</code>")
	default:
		names := make([]string, len(a.Tenants))
		for i, t := range a.Tenants {
			names[i] = "<code>" + e(t) + "</code>"
		}
		row("Tenants", fmt.Sprintf("%d: %s", len(a.Tenants), strings.Join(names, ", ")))
	}
	b.WriteString("</table>")
	return b.String()
}

// tunerRuns reports whether a tuner runs: a mode other than off on the
// host, or a GPU given a mode of its own.
func (a About) tunerRuns() bool {
	return (a.TunerMode != "" && a.TunerMode != "off") || len(a.TunerGPUModes) > 0
}

// TunerModes says the tuner's mode on each GPU: the host's where no GPU
// has one of its own ("recommend"), else each mode with its GPUs and the
// host's elsewhere ("enforce on GPU 0, off elsewhere"); "off (no tuner
// runs)" where none runs.
func (a About) TunerModes() string {
	if !a.tunerRuns() {
		return "off (no tuner runs)"
	}
	host := cmpOr(a.TunerMode, "off")
	byMode := map[string][]string{}
	for g, m := range a.TunerGPUModes {
		if m != host {
			byMode[m] = append(byMode[m], g)
		}
	}
	if len(byMode) == 0 {
		return host
	}
	var parts []string
	for _, m := range landingModes {
		gpus := byMode[m]
		if len(gpus) == 0 {
			continue
		}
		slices.SortFunc(gpus, gpuKeyOrder)
		for i, g := range gpus {
			if _, err := strconv.Atoi(g); err == nil {
				gpus[i] = "GPU " + g // a UUID names itself: GPU-…
			}
		}
		on := gpus[len(gpus)-1]
		if len(gpus) > 1 {
			on = strings.Join(gpus[:len(gpus)-1], ", ") + " and " + on
		}
		parts = append(parts, m+" on "+on)
	}
	return strings.Join(parts, ", ") + ", " + host + " elsewhere"
}

// landingModes are the tuner's modes, the one that changes the most first.
var landingModes = []string{"enforce", "recommend", "off"}

// gpuKeyOrder orders --tuner.gpu-mode's GPUs: indices by number, then
// UUIDs.
func gpuKeyOrder(a, b string) int {
	ia, ea := strconv.Atoi(a)
	ib, eb := strconv.Atoi(b)
	switch {
	case ea == nil && eb == nil:
		return cmp.Compare(ia, ib)
	case ea == nil:
		return -1
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// tunerModesText says what the tuner does in the modes it has.
func tunerModesText(a About) string {
	if !a.tunerRuns() {
		return "the exporter measures and changes nothing"
	}
	modes := []string{cmpOr(a.TunerMode, "off")}
	for _, m := range a.TunerGPUModes {
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	if len(modes) == 1 {
		switch modes[0] {
		case "off":
			return "the tuner runs and changes nothing on any GPU"
		case "recommend":
			return "the tuner decides and shows what it would change, and changes nothing"
		case "enforce":
			return "the tuner changes the GPUs' settings and restores them at exit"
		}
		return ""
	}
	var parts []string
	for _, m := range landingModes {
		if !slices.Contains(modes, m) {
			continue
		}
		switch m {
		case "enforce":
			parts = append(parts, "where it enforces, the tuner changes the GPUs' settings and restores them at exit")
		case "recommend":
			parts = append(parts, "where it recommends, it shows what it would change, and changes nothing")
		case "off":
			parts = append(parts, "where it is off, it changes nothing")
		}
	}
	return strings.Join(parts, "; ")
}
