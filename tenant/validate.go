package tenant

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

// validate checks what needs the whole file: names, impossible SLOs,
// selectors that provably overlap. The tenants' share.min values are not
// summed here: a guarantee holds on the GPU (or MIG instance) the tenant
// runs on, and which tenants share one is known only at attribution time,
// where Build checks the sum per GPU and instance (see shares.go).
//
// Every tenant gets every check, a duplicate as any other, so that one
// pass lists all its problems; a check is skipped only where its problem
// would follow from one listed already: a key whose value failed to
// decode is not also missing, nor read as its default. unread are the
// lines the parser could not read (see ParseConfig), end the line where
// the last tenant ends.
func validate(errs *yamlconf.Errors, cfg *Config, unread []int, end int) {
	names := map[string]int{}
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		if t.keys == nil {
			continue // no mapping, and so no tenant: its problem is listed
		}
		next := end
		if i+1 < len(cfg.Tenants) {
			next = cfg.Tenants[i+1].Line
		}
		// the tenant holds a line that was not read: what it lacks may be there
		cut := slices.ContainsFunc(unread, func(l int) bool { return l >= t.Line && l < next })
		checkName(errs, t, names, cut)
		if len(t.Selectors) == 0 && !t.keys.Failed("selectors") && !cut {
			errs.Addf(t.Line, "tenant %q has no selectors; nothing could be attributed to it", t.Name)
		}
		checkSLO(errs, t, &cfg.Defaults, cut)
		checkLabelKeys(errs, t)
	}
	checkOverlaps(errs, cfg)
}

// checkName checks a tenant's name and that no tenant before it has it;
// names maps the names seen to where. Its problems are at the name's key,
// which need not be the tenant's first. A name that failed to decode, or
// that may be on a line not read (cut), is not missing.
func checkName(errs *yamlconf.Errors, t *Tenant, names map[string]int, cut bool) {
	name, line := t.Name, t.keys.Line("name", t.Line)
	if t.alias {
		line = t.Line // (its name's key is the anchor's)
	}
	switch {
	case name == "":
		if !t.keys.Failed("name") && !cut {
			errs.Addf(t.Line, "tenant has no name")
		}
		return
	case name == Unassigned:
		errs.Addf(line, "tenant name %q is reserved for usage that matches no tenant", Unassigned)
	case len(name) > maxNameLen:
		errs.Addf(line, "tenant name %.32q... is %d characters long; at most %d", name, len(name), maxNameLen)
		// shortened in the problems below, which would otherwise quote it
		// whole; two names are compared whole
		t.Name = name[:maxNameLen]
	case !validName(name):
		errs.Addf(line, "tenant name %q: use letters, digits, '_', '-', '.'", name)
	case name[0] == '-':
		// (a pod tenancy's names are spelt out so: PodTenantName)
		errs.Addf(line, "tenant name %q begins with '-': the name is an argument of the hooks the tuner runs (the MPS restart hook's first), which would read it as an option", name)
	}
	if first, dup := names[name]; dup {
		errs.Addf(line, "duplicate tenant name %q (first defined at line %d)", t.Name, first)
		return
	}
	names[name] = line
}

// checkLabelKeys checks the label keys of a tenant's kubernetes
// selectors as --tenants.kubernetes-default's label key is checked
// (labelKey): a name of at most 63 characters, after an optional DNS
// prefix of at most 253 and '/'. A pod cannot have a label of another
// key, and the selector would never match. An empty key is listed where
// the selector is decoded. A selector repeated through a YAML alias has
// its problem at the alias.
func checkLabelKeys(errs *yamlconf.Errors, t *Tenant) {
	for _, s := range t.Selectors {
		k := s.Kubernetes
		if k == nil {
			continue
		}
		line := max(k.labelsLine, s.Line) // (an alias's is after its anchor)
		for _, key := range slices.Sorted(maps.Keys(k.Labels)) {
			if key != "" && !labelKey(key) {
				shown := fmt.Sprintf("%.64q", key)
				if utf8.RuneCountInString(key) > 64 {
					shown += "..."
				}
				errs.Addf(line, "tenant %q: kubernetes.labels key %s (%d bytes) is not a Kubernetes label key (a name of at most 63 characters, letters, digits, '-', '_', '.', after an optional DNS prefix of at most 253 and '/'); no pod has such a label", t.Name, shown, len(key))
			}
		}
	}
}

// checkSLO checks a tenant's SLO against its latency source and the
// file's defaults. A problem of two values is put at the line of the key
// its message names first, the value it asks to change; a value the
// tenant does not set is named with where it comes from (the defaults
// section's key and line, or the built-in default), and a problem about
// one of those is put at that key, or, for a built-in default, at the
// tenant's key that brings it in (slo, latency_source).
func checkSLO(errs *yamlconf.Errors, t *Tenant, d *Defaults, cut bool) {
	s := t.SLO
	if s == nil {
		return
	}
	sloLine := t.keys.Line("slo", t.Line)
	if t.LatencySource == nil && !t.keys.Failed("latency_source") && !cut {
		errs.Addf(sloLine, "tenant %q has an slo but no latency_source to measure it", t.Name)
	}
	window := setting{line: s.keys.Line("window", 0), from: "slo.window", ok: !s.keys.Failed("window") && s.Window > 0}
	if _, given := s.keys["window"]; !given {
		s.Window = d.SLOWindow
		window = d.setting("slo_window", sloLine)
	}
	scrape := d.setting("scrape_interval", sloLine)
	// A check that reads a value with a problem listed is skipped: it
	// would judge a value the file does not hold (a default in place of
	// one that failed), or only repeat that problem.
	window.ok = window.ok && s.Window > 0
	scrape.ok = scrape.ok && d.ScrapeInterval > 0
	if s.Target >= s.Window && window.ok {
		errs.Addf(s.keys.Line("target", sloLine), "tenant %q: slo.target %s is not shorter than the SLO window %s (%s); it cannot be observed", t.Name, s.Target, s.Window, window.from)
	}
	if s.Window < 2*d.ScrapeInterval && window.ok && scrape.ok {
		errs.Addf(window.line, "tenant %q: SLO window %s (%s) holds fewer than two scrapes at scrape_interval %s (%s)", t.Name, s.Window, window.from, d.ScrapeInterval, scrape.from)
	}
	if s.MinThroughput > 0 && s.Quantile > 0 && s.Quantile < 1 && window.ok {
		// With fewer than 1/(1-q) requests in a window, a single slow
		// request breaks the objective: the quantile is not defined
		// by the data. Such a floor makes the SLO unmeasurable.
		need := 1 / (1 - s.Quantile)
		if got := s.MinThroughput * s.Window.Seconds(); got < need {
			errs.Addf(s.keys.Line("min_throughput", sloLine), "tenant %q: slo.min_throughput %v req/s gives %.0f requests per %s window (%s), fewer than the %.0f a %v quantile needs", t.Name, s.MinThroughput, got, s.Window, window.from, need, s.Quantile)
		}
	}
	if l := t.LatencySource; l != nil && l.Timeout >= d.ScrapeInterval && !l.keys.Failed("timeout") && scrape.ok {
		line, from := l.keys.Line("timeout", 0), ""
		if line == 0 {
			line, from = t.keys.Line("latency_source", t.Line), " (the default)"
		}
		errs.Addf(line, "tenant %q: latency_source.timeout %s%s must be shorter than scrape_interval %s (%s)", t.Name, l.Timeout, from, d.ScrapeInterval, scrape.from)
	}
}

// setting is where a value a check reads is set: the line of its key, how
// a problem names it, and whether it decoded.
type setting struct {
	line int
	from string
	ok   bool
}

// setting is where the defaults section sets key; a key it does not give
// is the built-in default, put at line def.
func (d *Defaults) setting(key string, def int) setting {
	if line := d.keys.Line(key, 0); line > 0 {
		return setting{line, fmt.Sprintf("defaults.%s at line %d", key, line), !d.keys.Failed(key)}
	}
	return setting{def, "the default", true}
}

// maxNameLen bounds a tenant's name, as long as a Kubernetes object's: it
// is a label of every series of the tenant.
const maxNameLen = 253

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func validName(s string) bool { return nameRE.MatchString(s) }
