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

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
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
	// one of its own. TunerGPUs are the GPUs of the latest snapshot with
	// the mode the tuner applies to each (TunerGPUsOf); nil before the
	// first snapshot, when the modes said are the flags'.
	TunerMode     string
	TunerGPUModes map[string]string
	TunerPolicy   string
	TunerGPUs     []TunerGPU
	// KillSwitch is whether the tuner's kill switch is engaged (at its
	// latest round): it then changes nothing but reverts of its own,
	// whatever the modes.
	KillSwitch bool
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

// TunerGPU is a GPU the latest snapshot lists, with the mode the tuner
// applies to it.
type TunerGPU struct {
	Index int
	UUID  string
	Mode  string
}

// TunerGPUsOf is each GPU of snap with the mode st applies to it
// (tuner.Status.ModeOf: a GPU given two modes, by index and by UUID, gets
// the safer); nil without a tuner, a snapshot or a GPU in it.
func TunerGPUsOf(st *tuner.Status, snap *tenant.Snapshot) []TunerGPU {
	if st == nil || snap == nil || snap.Readings == nil || len(snap.Readings.Devices) == 0 {
		return nil
	}
	gpus := make([]TunerGPU, 0, len(snap.Readings.Devices))
	for _, d := range snap.Readings.Devices {
		gpus = append(gpus, TunerGPU{Index: d.Index, UUID: d.UUID, Mode: string(st.ModeOf(d.UUID, d.Index))})
	}
	slices.SortFunc(gpus, func(a, b TunerGPU) int { return cmp.Compare(a.Index, b.Index) })
	return gpus
}

// TunerModes says the tuner's mode on each GPU: once a snapshot has
// listed the GPUs, the mode the tuner applies to each (appliedTunerModes);
// before, the flags' (FlaggedTunerModes). "off (no tuner runs)" where none
// runs.
func (a About) TunerModes() string {
	if a.TunerGPUs == nil {
		return a.FlaggedTunerModes()
	}
	return a.appliedTunerModes()
}

// FlaggedTunerModes says the tuner's modes as flagged: the host's where
// no GPU has one of its own ("recommend"), else each mode with the GPUs
// --tuner.gpu-mode gives it and the host's elsewhere, said to be the
// flags' ("enforce on GPU 0, off elsewhere (as flagged)"): which GPU a key
// names, and the mode a GPU named twice gets, are known once the GPUs
// are read. "off (no tuner runs)" where none runs.
func (a About) FlaggedTunerModes() string {
	if !a.tunerRuns() {
		return "off (no tuner runs)"
	}
	host := cmp.Or(a.TunerMode, "off")
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
		if gpus := byMode[m]; len(gpus) > 0 {
			parts = append(parts, m+" on "+gpuKeysText(gpus))
		}
	}
	return strings.Join(parts, ", ") + ", " + host + " elsewhere (as flagged)"
}

// appliedTunerModes says the mode the tuner applies to each GPU of the
// latest snapshot (TunerGPUs): one mode where every GPU has it
// ("enforce"), else each mode with its GPUs, and the host's "elsewhere"
// where a GPU that no --tuner.gpu-mode names has it ("enforce on GPU 0,
// off elsewhere"); then the --tuner.gpu-mode keys that name no GPU read
// ("GPU 7: no such GPU").
func (a About) appliedTunerModes() string {
	if !a.tunerRuns() {
		return "off (no tuner runs)"
	}
	host := cmp.Or(a.TunerMode, "off")
	known := map[string]bool{} // the keys that name a GPU read
	byMode, elsewhere := map[string][]string{}, false
	for _, g := range a.TunerGPUs {
		index := strconv.Itoa(g.Index)
		_, byIndex := a.TunerGPUModes[index]
		_, byUUID := a.TunerGPUModes[g.UUID]
		known[index], known[g.UUID] = true, true
		elsewhere = elsewhere || (!byIndex && !byUUID) // in the host's mode
		byMode[g.Mode] = append(byMode[g.Mode], index)
	}
	var parts []string
	for _, m := range landingModes {
		switch gpus := byMode[m]; {
		case len(gpus) == 0, m == host && elsewhere:
		case len(byMode) == 1:
			parts = append(parts, m)
		default:
			parts = append(parts, m+" on "+gpuKeysText(gpus))
		}
	}
	if elsewhere {
		if len(byMode) == 1 {
			parts = append(parts, host)
		} else {
			parts = append(parts, host+" elsewhere")
		}
	}
	text := strings.Join(parts, ", ")
	var none []string
	for g := range a.TunerGPUModes {
		if !known[g] {
			none = append(none, g)
		}
	}
	if len(none) > 0 {
		text += "; " + gpuKeysText(none) + ": no such GPU"
	}
	return text
}

// gpuKeysText names GPUs given by index or UUID, in order: "GPU 0, GPU 3
// and GPU-ab".
func gpuKeysText(keys []string) string {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, gpuKeyOrder)
	for i, g := range keys {
		if _, err := strconv.Atoi(g); err == nil {
			keys[i] = "GPU " + g // a UUID names itself: GPU-…
		}
	}
	text := keys[len(keys)-1]
	if len(keys) > 1 {
		text = strings.Join(keys[:len(keys)-1], ", ") + " and " + text
	}
	return text
}

// landingModes are the tuner's modes (tuner.Modes), the one that changes
// the most first.
var landingModes = func() []string {
	var out []string
	for _, m := range slices.Backward(tuner.Modes) {
		out = append(out, string(m))
	}
	return out
}()

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

// killSwitchText is what the tuner does in enforce mode with its kill
// switch engaged.
const killSwitchText = "kill switch on: the tuner changes nothing (reverts excepted)"

// tunerModesText says what the tuner does in the modes it has.
func tunerModesText(a About) string {
	if !a.tunerRuns() {
		return "the exporter measures and changes nothing"
	}
	var modes []string // the applied ones once the GPUs are read, else the flags'
	if a.TunerGPUs == nil {
		modes = append(modes, cmp.Or(a.TunerMode, "off"))
		for _, m := range a.TunerGPUModes {
			modes = append(modes, m)
		}
	}
	for _, g := range a.TunerGPUs {
		modes = append(modes, g.Mode)
	}
	slices.Sort(modes)
	modes = slices.Compact(modes)
	if len(modes) == 1 {
		switch modes[0] {
		case "off":
			return "the tuner runs and changes nothing on any GPU"
		case "recommend":
			return "the tuner decides and shows what it would change, and changes nothing"
		case "enforce":
			if a.KillSwitch {
				return killSwitchText
			}
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
			if a.KillSwitch {
				parts = append(parts, "where it enforces, "+killSwitchText)
				break
			}
			parts = append(parts, "where it enforces, the tuner changes the GPUs' settings and restores them at exit")
		case "recommend":
			parts = append(parts, "where it recommends, it shows what it would change, and changes nothing")
		case "off":
			parts = append(parts, "where it is off, it changes nothing")
		}
	}
	return strings.Join(parts, "; ")
}
