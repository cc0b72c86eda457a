// Package webui holds the exporter's pages for people (as opposed to
// Prometheus): the landing page, which says what the exporter serves, from
// which backend and with what tuner mode, and links the rest; and the
// tuner page (/tuner), the latest tenant snapshot and tuner status joined
// into one view. It reads what it is given (the wiring passes functions
// that return the latest snapshot and status) and calls no backend.
package webui

import (
	"fmt"
	"html"
	"net/http"
	"slices"
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
	// "enforce"); TunerPolicy the policy it runs ("" when off).
	TunerMode   string
	TunerPolicy string
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
	mode := e(a.TunerMode)
	switch a.TunerMode {
	case "off":
		mode += ": the tuner decides and changes nothing"
	case "recommend":
		mode += ": the tuner decides and shows what it would change, and changes nothing"
	case "enforce":
		mode += ": the tuner changes the GPUs' settings and restores them at exit"
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
