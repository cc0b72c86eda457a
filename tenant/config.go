// Package tenant turns raw GPU readings into per-tenant figures: it reads the
// tenants file, attributes every process, MIG instance and vGPU instance to a
// tenant (by executable, user, cgroup, Kubernetes pod, MIG or vGPU identity),
// sums or apportions usage per tenant, and follows each tenant's request
// latency against its SLO from the tenant's own /metrics.
//
// The result of each sample is an immutable Snapshot (snapshot.go). See
// docs/tenants.md for the file format and the rules.
package tenant

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
	"github.com/vgpu-exporter/vgpu_exporter/latency"
)

// Defaults applied when the tenants file does not set them.
const (
	DefaultSLOWindow      = 5 * time.Minute
	DefaultScrapeInterval = 15 * time.Second
	DefaultSourceTimeout  = 2 * time.Second
	DefaultSourceMaxBytes = 4 << 20
	// MaxSourceMaxBytes is the ceiling of latency_source.max_bytes: a body
	// is decoded as it streams, but one protobuf message may be as large.
	MaxSourceMaxBytes = 64 << 20
	// MaxConfigBytes bounds a tenants file: ample for the 1000 tenants a
	// file may define (a tenant of the examples takes 200-400 bytes). A
	// file is read whole and its YAML tree costs up to a hundred times its
	// size: one of 4 MiB took the process 400 MB past its resident size,
	// beyond the chart's memory limit of 256 MiB.
	MaxConfigBytes = 1 << 20
)

// Config is a parsed and validated tenants file. A Config with no tenants is
// valid: everything is then attributed to Unassigned.
type Config struct {
	// File is the path the configuration was read from ("" when none).
	File     string
	Tenants  []Tenant `yaml:"tenants"`
	Defaults Defaults `yaml:"defaults"`
	// Metering is the prices of the cost series; nil: the --metering.*
	// flags' (BuilderOptions.Prices), if any.
	Metering *Prices `yaml:"metering"`

	// sum is the SHA-256 of the bytes ParseConfig read (zero for a
	// configuration not parsed): a reload of those same bytes changes
	// nothing (sameFile).
	sum [sha256.Size]byte
}

// sameFile says whether c is what ParseConfig(name, data) returns: c was
// parsed from those bytes under that name.
func (c *Config) sameFile(name string, data []byte) bool {
	return c.sum != [sha256.Size]byte{} && c.File == name && c.sum == sha256.Sum256(data)
}

// Defaults are the file-wide settings.
type Defaults struct {
	SLOWindow      time.Duration `yaml:"slo_window"`      // sliding window of SLO figures
	ScrapeInterval time.Duration `yaml:"scrape_interval"` // how often latency sources are scraped
	// IdleEnergy is where a GPU's energy that no tenant's activity
	// accounts for goes: "idle" (also when empty) or "reservation".
	IdleEnergy IdleEnergy `yaml:"idle_energy"`

	keys yamlconf.Keys // where the file sets them, for the tenants' problems
}

// Tenant is one configured tenant.
type Tenant struct {
	Name     string          `yaml:"name"`
	Class    gpu.TenantClass `yaml:"class"`
	Priority int             `yaml:"priority"`
	// Selectors: a process or instance belongs to the tenant if any entry
	// matches; the keys inside one entry must all match.
	Selectors     []Selector     `yaml:"selectors"`
	SLO           *SLO           `yaml:"slo"`            // nil when none
	Share         *Share         `yaml:"share"`          // nil when none
	LatencySource *LatencySource `yaml:"latency_source"` // nil when none
	// RestartCost is what one restart of the tenant's processes costs it,
	// as time of its work lost or paused (a training job: about half its
	// checkpoint interval plus the time to load the checkpoint); the tuner
	// weighs every change that restarts a client against it. 0: the
	// tuner's default.
	RestartCost time.Duration `yaml:"restart_cost"`
	// Line is where the tenant is defined in the file: for a tenant
	// repeated through a YAML alias (*name), the alias's line.
	Line int `yaml:"-"`

	keys yamlconf.Keys // where its keys are, for the whole-file checks
	// alias: the tenant is an alias's repeat of one defined before; its
	// keys' lines are the anchor's, its problems of the file are at Line
	alias bool
}

// Selector is one entry of a tenant's selectors. Empty fields are not
// constrained; at least one field is set.
type Selector struct {
	Kubernetes  *KubernetesSelector `yaml:"kubernetes"`
	Cgroup      string              `yaml:"cgroup"` // glob on the cgroup path ('*' also matches '/')
	MIGUUID     string              `yaml:"mig_uuid"`
	GPUInstance *GPUInstanceRef     `yaml:"gpu_instance"`
	VGPU        *VGPUSelector       `yaml:"vgpu"`
	Executable  string              `yaml:"executable"` // glob on the executable name
	UID         *int                `yaml:"uid"`
	Line        int                 `yaml:"-"`

	cgroupRE *glob
	exeRE    *glob
}

// KubernetesSelector matches the pod a process or device belongs to.
type KubernetesSelector struct {
	Namespace string            `yaml:"namespace"` // exact
	Pod       string            `yaml:"pod"`       // glob on the pod name
	PodUID    string            `yaml:"pod_uid"`   // exact
	Container string            `yaml:"container"` // glob on the container name
	Labels    map[string]string `yaml:"labels"`    // all must be equal (needs pod metadata)

	podRE       *glob
	containerRE *glob
	labelsLine  int // where labels are given, for the whole-file checks
}

// GPUInstanceRef names a MIG GPU instance by device index and GPU instance ID.
type GPUInstanceRef struct {
	GPU int `yaml:"gpu"`
	ID  int `yaml:"id"`
}

// VGPUSelector matches a vGPU instance.
type VGPUSelector struct {
	UUID   string `yaml:"uuid"`    // exact
	VMName string `yaml:"vm_name"` // glob

	vmRE *glob
}

// SLO is a latency objective: Quantile of requests complete within Target.
type SLO struct {
	Quantile      float64       `yaml:"quantile"`
	Target        time.Duration `yaml:"target"`
	MinThroughput float64       `yaml:"min_throughput"` // requests per second floor; 0 = none
	Window        time.Duration `yaml:"window"`         // defaults.slo_window unless set
	Line          int           `yaml:"-"`              // where the slo is in the file

	keys yamlconf.Keys // where its keys are, for the whole-file checks
}

// Share is the tuner's bounds for a tenant's share of the GPU (or MIG
// instance) it runs on (0-1): Min is its guarantee there, Max its cap.
type Share struct {
	Min float64 `yaml:"min"`
	Max float64 `yaml:"max"`
}

// LatencySource is where a tenant's request latency is read.
type LatencySource struct {
	URL      string // http(s)://... or sim://<app>
	Preset   string // one of the latency.Preset* names, or ""
	Metric   string // histogram name when no preset (overrides the preset's)
	Matchers map[string]string
	Timeout  time.Duration
	MaxBytes int64
	// FollowRedirects is same-host (the default), any or none.
	FollowRedirects string

	keys yamlconf.Keys // where its keys are, for the whole-file checks
}

// key identifies the source's configuration; a reload that leaves it
// unchanged keeps the source's counters.
func (l *LatencySource) key() string {
	keys := make([]string, 0, len(l.Matchers))
	for k := range l.Matchers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	// each string quoted: a separator inside a value must not read as
	// the start of the next field (matchers {a: "x|b=2"} and {a: x, b: 2})
	fmt.Fprintf(&b, "%q|%q|%q|%s|%d|%q", l.URL, l.Preset, l.Metric, l.Timeout, l.MaxBytes, l.FollowRedirects)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%q=%q", k, l.Matchers[k])
	}
	return b.String()
}

// TenantByName returns the tenant with this name, or nil.
func (c *Config) TenantByName(name string) *Tenant {
	if c == nil {
		return nil
	}
	for i := range c.Tenants {
		if c.Tenants[i].Name == name {
			return &c.Tenants[i]
		}
	}
	return nil
}

// GivenSLO is the SLO the file gives the tuner for tenant name: found
// says the file defines the tenant; q is 0 when it has no SLO; metric is
// what the SLO bounds ("" for end-to-end request latency); line is where
// the SLO is (the tenant when it has none). Its signature is that of
// sim.Scenario.CheckSLOs' argument, so that the scenario the simulator
// judges and the tenants file the tuner is given are checked against
// each other wherever both are loaded.
func (c *Config) GivenSLO(name string) (q float64, target time.Duration, metric string, line int, found bool) {
	t := c.TenantByName(name)
	switch {
	case t == nil:
		return 0, 0, "", 0, false
	case t.SLO == nil:
		return 0, 0, "", t.Line, true
	}
	return t.SLO.Quantile, t.SLO.Target, t.LatencySource.SLOMetric(), t.SLO.Line, true
}

// SLOMetric is what an SLO measured from this source bounds, read from
// its histogram: "ttft" for time to first token (presets *-ttft, or a
// metric named *time_to_first_token*), "itl" for inter-token latency
// (*-itl, *inter_token* or *time_per_output_token*), "" for end-to-end
// request latency (every other source, nil included).
func (l *LatencySource) SLOMetric() string {
	if l == nil {
		return ""
	}
	name := l.Metric
	if name == "" {
		name = l.Preset
	}
	switch {
	case strings.HasSuffix(name, "-ttft"), strings.Contains(name, "time_to_first_token"):
		return "ttft"
	case strings.HasSuffix(name, "-itl"), strings.Contains(name, "inter_token"), strings.Contains(name, "time_per_output_token"):
		return "itl"
	}
	return ""
}

// EmptyConfig is the configuration used when no tenants file is given.
func EmptyConfig() *Config {
	return &Config{Defaults: Defaults{SLOWindow: DefaultSLOWindow, ScrapeInterval: DefaultScrapeInterval}}
}

// LoadConfig reads and validates a tenants file. The error lists every
// problem found, one per line, as "file:line: problem". A file that is not
// a regular file (a FIFO, a device: a read could block or never end) or is
// larger than MaxConfigBytes is refused before it is read.
func LoadConfig(path string) (*Config, error) {
	data, err := fileread.Regular(path, MaxConfigBytes)
	if err != nil {
		return nil, err // names the file
	}
	return ParseConfig(path, data)
}

// ErrNoTenants is wrapped by the error of NotEmpty.
var ErrNoTenants = errors.New("defines no tenants")

// NotEmpty returns an error (wrapping ErrNoTenants) when cfg has no tenants:
// a file emptied or cut short while it is rewritten would otherwise drop
// every tenant and restart their counters. Callers refuse such a file
// unless an empty configuration is intended.
func NotEmpty(cfg *Config) error {
	if len(cfg.Tenants) > 0 {
		return nil
	}
	return fmt.Errorf("%s %w; refusing an empty tenants file, which would attribute everything to %s", cfg.File, ErrNoTenants, Unassigned)
}

// ParseConfig parses and validates a tenants file held in data; name is used
// in error messages and as Config.File.
func ParseConfig(name string, data []byte) (*Config, error) {
	errs := &yamlconf.Errors{File: name, Max: maxErrors}
	cfg := EmptyConfig()
	cfg.File = name
	// The whole-file checks run even when some field failed to decode, so
	// that one pass lists every problem; a field that failed keeps its
	// default, and a check that would only repeat its failure is skipped.
	root := yamlconf.Parse(errs, data, maxAliases, maxAliasedNodes)
	// A line with a syntax error is read blanked (with its block), and an
	// alias past the budget as null: what the tenant there lacks may be
	// only unread. These problems are all listed before decoding starts.
	unread := errs.Lines()
	if root != nil {
		errs.Add(cfg.UnmarshalYAML(root))
	}
	validate(errs, cfg, unread, tenantsEnd(root))
	if err := errs.Err(); err != nil {
		return nil, err
	}
	cfg.sum = sha256.Sum256(data)
	return cfg, nil
}

// maxRestartCost bounds restart_cost: a day of lost work is already a
// cost no change is worth.
const maxRestartCost = 24 * time.Hour

// tenantsEnd is the line of the key after tenants in the file's mapping,
// where the last tenant ends; past the end of the file when none.
func tenantsEnd(root *yaml.Node) int {
	if root != nil && root.Kind == yaml.MappingNode {
		for i := 0; i+2 < len(root.Content); i += 2 {
			if root.Content[i].Value == "tenants" {
				return root.Content[i+2].Line
			}
		}
	}
	return math.MaxInt
}

// Limits that keep a small file from costing much: YAML aliases can repeat
// a tenant or a selector any number of times, and every pair of selectors
// of two tenants is checked for overlap.
const (
	maxAliases      = 1000    // alias references (*name) followed in one file
	maxAliasedNodes = 100_000 // nodes they repeat in all (a few to a big subtree)
	maxTenants      = 1000    // tenants in one file
	maxSelectors    = 10000   // selectors of all tenants together
	maxErrors       = 100     // problems listed; the rest are counted
)

// UnmarshalYAML decodes the whole file into c, over c's defaults.
func (c *Config) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	got := errs.Fields(n, "the tenants file", "", c)
	aliasedItems(got["tenants"], len(c.Tenants), func(i, line int) {
		c.Tenants[i].Line, c.Tenants[i].alias = line, true
		for k := range c.Tenants[i].Selectors {
			c.Tenants[i].Selectors[k].Line = line
		}
	})
	// counted whether or not every tenant decoded: a long list of broken
	// tenants costs as much to check as one of good ones
	if f := got["tenants"]; f.Node != nil && len(c.Tenants) > maxTenants {
		errs.Addf(f.Line, "%d tenants; at most %d are supported", len(c.Tenants), maxTenants)
		c.Tenants = nil
	}
	selectors := 0
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if selectors+len(t.Selectors) > maxSelectors {
			errs.Addf(t.Selectors[maxSelectors-selectors].Line, "more than %d selectors in the file", maxSelectors)
			c.Tenants = c.Tenants[:i]
			break
		}
		selectors += len(t.Selectors)
	}
	return errs.Err()
}

// aliasedItems calls at(i, line) for each item of sequence field f (of
// n items decoded) that repeats another through an alias (*name), line
// the alias's: a tenant or selector so repeated is where the alias is,
// not where its anchor is (the nodes decoded are the anchor's).
func aliasedItems(f yamlconf.Field, n int, at func(i, line int)) {
	if f.Node == nil || f.Kind != yaml.SequenceNode || len(f.Content) != n {
		return
	}
	for i, item := range f.Content {
		if item.Kind == yaml.AliasNode {
			at(i, item.Line)
		}
	}
}

// UnmarshalYAML decodes the defaults over the values d holds.
func (d *Defaults) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	got := errs.Fields(n, "defaults", "defaults.", d)
	d.keys = got.Keys()
	for _, x := range []struct {
		key string
		d   time.Duration
	}{{"slo_window", d.SLOWindow}, {"scrape_interval", d.ScrapeInterval}} {
		if f := got[x.key]; f.OK && x.d <= 0 {
			errs.Addf(f.Line, "defaults.%s must be positive", x.key)
		}
	}
	if f := got["idle_energy"]; f.OK {
		if !d.IdleEnergy.valid() {
			errs.Addf(f.Line, "defaults.idle_energy %q: want %q or %q", d.IdleEnergy, IdleToIdle, IdleByReservation)
			d.IdleEnergy = IdleToIdle
		}
	}
	return errs.Err()
}

// UnmarshalYAML decodes one tenant; its class defaults to best-effort.
func (t *Tenant) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	*t = Tenant{Line: n.Line, Class: gpu.ClassBestEffort}
	got := errs.Fields(n, "a tenant", "", t)
	t.keys = got.Keys()
	aliasedItems(got["selectors"], len(t.Selectors), func(i, line int) { t.Selectors[i].Line = line })
	if f := got["restart_cost"]; f.OK && (t.RestartCost < 0 || t.RestartCost > maxRestartCost) {
		errs.Addf(f.Line, "restart_cost %s is outside [0, %s]", t.RestartCost, maxRestartCost)
	}
	if f := got["class"]; f.OK {
		switch t.Class {
		case gpu.ClassLatency, gpu.ClassBatch, gpu.ClassBestEffort:
		default:
			errs.Addf(f.Line, "class %q is not one of latency, batch, best-effort", t.Class)
			t.Class = gpu.ClassBestEffort
		}
	}
	return errs.Err()
}

// UnmarshalYAML decodes one selector and compiles its globs.
func (s *Selector) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	*s = Selector{Line: n.Line}
	switch {
	case n.Kind != yaml.MappingNode:
		errs.Addf(n.Line, "a selector must be a mapping (e.g. {executable: vllm})")
		return errs.Err()
	case len(n.Content) == 0:
		errs.Addf(n.Line, "a selector has no keys; it would match nothing")
		return errs.Err()
	}
	got := errs.Fields(n, "a selector", "", s)
	for _, x := range []struct{ key, val, what string }{
		{"cgroup", s.Cgroup, "cgroup glob"}, {"mig_uuid", s.MIGUUID, "mig_uuid"}, {"executable", s.Executable, "executable"},
	} {
		if f, given := got[x.key]; given && x.val == "" {
			errs.Addf(f.Line, "%s is empty", x.what)
		}
	}
	if f := got["uid"]; f.OK && *s.UID < 0 {
		errs.Addf(f.Line, "uid must not be negative")
	}
	// the executable is matched against the process's name without its
	// directory (the base of the backend's name, or /proc/PID/comm): a
	// glob with a '/' would never match
	if f := got["executable"]; f.OK && strings.Contains(s.Executable, "/") {
		errs.Addf(f.Line, "executable %q holds a '/': it is matched against the executable's name without its directory (%q); use a cgroup selector to tell apart processes by where they run", s.Executable, path.Base(s.Executable))
	}
	// a MIG instance's UUID starts with "MIG-" (MIG-<uuid>, or
	// MIG-GPU-<uuid>/<gi>/<ci> of older drivers); a GPU's UUID names no
	// MIG instance and would never match
	if f := got["mig_uuid"]; f.OK && s.MIGUUID != "" && !strings.HasPrefix(s.MIGUUID, "MIG-") {
		errs.Addf(f.Line, "mig_uuid %q is not a MIG instance's UUID (MIG-...); to select a MIG instance by its GPU, use gpu_instance", s.MIGUUID)
	}
	s.cgroupRE, s.exeRE = compileGlob(s.Cgroup), compileGlob(s.Executable)
	addClassProblems(&errs, got, "cgroup", s.cgroupRE, "executable", s.exeRE)
	return errs.Err()
}

// namespaceRE is a Kubernetes namespace (an RFC 1123 label).
var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// UnmarshalYAML decodes a kubernetes selector and compiles its globs.
func (k *KubernetesSelector) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	got := errs.Fields(n, "kubernetes selector", "kubernetes.", k)
	// a key given empty is refused, not read as "any": a value left empty
	// (by a template, say) would otherwise widen the selector to every
	// namespace, pod or container
	emptyKey := false
	for _, x := range []struct{ key, val string }{
		{"namespace", k.Namespace}, {"pod", k.Pod}, {"pod_uid", k.PodUID}, {"container", k.Container},
	} {
		if f, given := got[x.key]; given && f.OK && x.val == "" {
			errs.Addf(f.Line, "kubernetes.%s is empty", x.key)
			emptyKey = true
		}
	}
	// values no pod can have would never match
	if f := got["namespace"]; f.OK && k.Namespace != "" && !namespaceRE.MatchString(k.Namespace) {
		errs.Addf(f.Line, "kubernetes.namespace %q is not a Kubernetes namespace (lower-case letters, digits and '-', at most 63); it would never match", k.Namespace)
	}
	if f := got["pod_uid"]; f.OK && k.PodUID != "" && !poduid.Valid(k.PodUID) {
		errs.Addf(f.Line, "kubernetes.pod_uid %q is not a pod UID (8-4-4-4-12 hex digits, or 32 of a static pod); it would never match", k.PodUID)
	}
	// a UID matches in any case: so that two tenants' UIDs that differ in
	// case alone are seen to overlap, it is kept in the API's (lower) case
	k.PodUID = strings.ToLower(k.PodUID)
	if f := got["labels"]; f.OK {
		k.labelsLine = f.Line
		if _, ok := k.Labels[""]; ok {
			errs.Addf(f.Line, "kubernetes.labels: a label key is empty; no pod has such a label")
		}
	}
	if !emptyKey && k.Namespace == "" && k.Pod == "" && k.PodUID == "" && k.Container == "" && len(k.Labels) == 0 {
		errs.Addf(n.Line, "kubernetes selector has no keys (namespace, pod, pod_uid, container, labels)")
	}
	k.podRE, k.containerRE = compileGlob(k.Pod), compileGlob(k.Container)
	addClassProblems(&errs, got, "pod", k.podRE, "container", k.containerRE)
	return errs.Err()
}

// UnmarshalYAML decodes a MIG GPU instance reference; both keys are needed.
func (g *GPUInstanceRef) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	*g = GPUInstanceRef{GPU: -1, ID: -1}
	got := errs.Fields(n, "gpu_instance", "gpu_instance.", g)
	for _, x := range []struct {
		key string
		v   int
	}{{"gpu", g.GPU}, {"id", g.ID}} {
		if f := got[x.key]; f.OK && x.v < 0 {
			errs.Addf(f.Line, "gpu_instance.%s must not be negative", x.key)
		}
	}
	if g.GPU < 0 || g.ID < 0 {
		errs.Addf(n.Line, "gpu_instance needs both gpu and id")
	}
	return errs.Err()
}

// UnmarshalYAML decodes a vGPU selector and compiles its glob.
func (v *VGPUSelector) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	got := errs.Fields(n, "vgpu selector", "vgpu.", v)
	if v.UUID == "" && v.VMName == "" {
		errs.Addf(n.Line, "vgpu selector needs uuid or vm_name")
	}
	v.vmRE = compileGlob(v.VMName)
	addClassProblems(&errs, got, "vm_name", v.vmRE, "", nil)
	return errs.Err()
}

// addClassProblems adds the problems of the globs of two keys, at their
// lines.
func addClassProblems(errs *yamlconf.Errors, got yamlconf.Given, key1 string, g1 *glob, key2 string, g2 *glob) {
	for _, x := range []struct {
		key string
		g   *glob
	}{{key1, g1}, {key2, g2}} {
		if p := x.g.classProblem(x.key); p != "" && got[x.key].Node != nil {
			errs.Addf(got[x.key].Line, "%s", p)
		}
	}
}

// UnmarshalYAML decodes an SLO; quantile and target are needed.
func (s *SLO) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	*s = SLO{}
	got := errs.Fields(n, "slo", "slo.", s)
	s.Line, s.keys = n.Line, got.Keys()
	if f := got["quantile"]; f.OK && (s.Quantile <= 0 || s.Quantile >= 1) {
		errs.Addf(f.Line, "slo.quantile %v is outside (0,1)", s.Quantile)
	}
	if f := got["target"]; f.OK && s.Target <= 0 {
		errs.Addf(f.Line, "slo.target must be > 0, got %s", f.Value)
	}
	if f := got["min_throughput"]; f.OK && s.MinThroughput < 0 {
		errs.Addf(f.Line, "slo.min_throughput must not be negative")
	}
	if f := got["window"]; f.OK && s.Window <= 0 {
		errs.Addf(f.Line, "slo.window must be positive")
	}
	if _, given := got["quantile"]; !given {
		errs.Addf(n.Line, "slo needs a quantile (e.g. 0.99)")
	}
	if _, given := got["target"]; !given {
		errs.Addf(n.Line, "slo needs a target latency (e.g. 250ms)")
	}
	return errs.Err()
}

// UnmarshalYAML decodes share bounds; they default to [0,1].
func (s *Share) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	*s = Share{Min: 0, Max: 1}
	got := errs.Fields(n, "share", "share.", s)
	inRange := true
	for _, x := range []struct {
		key string
		v   float64
	}{{"min", s.Min}, {"max", s.Max}} {
		if f := got[x.key]; f.OK && (x.v < 0 || x.v > 1) {
			errs.Addf(f.Line, "share.%s %v is outside [0,1]", x.key, x.v)
			inRange = false
		}
	}
	// at the key the problem names first, wherever the mapping starts; a
	// bound outside [0,1] has its problem listed, not this one besides
	if s.Min > s.Max && inRange {
		errs.Addf(got.Keys().Line("min", n.Line), "share.min %v is greater than share.max %v", s.Min, s.Max)
	}
	return errs.Err()
}

// UnmarshalYAML decodes a latency source; a url and a preset or a metric
// are needed.
func (l *LatencySource) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	f := struct {
		URL      string            `yaml:"url"`
		Preset   string            `yaml:"preset"`
		Metric   string            `yaml:"metric"`
		Matchers map[string]string `yaml:"matchers"`
		Timeout  time.Duration     `yaml:"timeout"`
		MaxBytes yamlconf.Size     `yaml:"max_bytes"`
		Follow   string            `yaml:"follow_redirects"`
	}{Timeout: DefaultSourceTimeout, MaxBytes: DefaultSourceMaxBytes, Follow: latency.RedirectsSameHost}
	got := errs.Fields(n, "latency_source", "latency_source.", &f)
	*l = LatencySource{URL: f.URL, Preset: f.Preset, Metric: f.Metric, Matchers: f.Matchers, Timeout: f.Timeout, MaxBytes: int64(f.MaxBytes), FollowRedirects: f.Follow, keys: got.Keys()}
	if v, given := got["url"]; given {
		// named as everywhere else: a password or query token masked
		shown := urlmask.DisplayURL(l.URL)
		u, err := url.Parse(l.URL)
		switch {
		case err != nil:
			errs.Addf(v.Line, "latency_source.url %q: %s", shown, urlmask.URLParseReason(l.URL, err))
		case u.Scheme == "http" || u.Scheme == "https":
			// url.Parse takes any digits for a port and leaves the query
			// unread: either would fail every scrape, not the check.
			if u.Host == "" {
				errs.Addf(v.Line, "latency_source.url %q has no host", shown)
			} else if p := u.Port(); p != "" {
				if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
					errs.Addf(v.Line, "latency_source.url %q: port %s is not in 1-65535", shown, p)
				}
			}
			if _, err := url.ParseQuery(u.RawQuery); err != nil {
				// the error quotes the escape, which may be part of a token
				errs.Addf(v.Line, "latency_source.url %q: its query holds a %% not followed by two hex digits (write a literal %% as %%25)", shown)
			}
		case u.Scheme == "sim":
			if latency.SimApp(l.URL) == "" {
				errs.Addf(v.Line, "latency_source.url %q names no application (sim://<app>)", shown)
			}
		default:
			errs.Addf(v.Line, "latency_source.url %q: scheme must be http, https or sim", shown)
		}
	}
	if v, given := got["preset"]; given {
		if !slices.Contains(latency.Presets, l.Preset) {
			errs.Addf(v.Line, "unknown latency_source.preset %q (known: %s)", l.Preset, strings.Join(latency.Presets, ", "))
		}
	}
	if v, given := got["metric"]; given && !model.LegacyValidation.IsValidMetricName(l.Metric) && !model.UTF8Validation.IsValidMetricName(l.Metric) {
		errs.Addf(v.Line, "latency_source.metric %q is not a valid metric name", l.Metric)
	}
	if v := got["timeout"]; v.OK && l.Timeout <= 0 {
		errs.Addf(v.Line, "latency_source.timeout must be positive")
	}
	if v := got["max_bytes"]; v.OK && l.MaxBytes < 1024 {
		errs.Addf(v.Line, "latency_source.max_bytes %s is below 1KiB", v.Value)
	} else if v.OK && l.MaxBytes > MaxSourceMaxBytes {
		errs.Addf(v.Line, "latency_source.max_bytes %s is above the ceiling of 64MiB", v.Value)
	}
	if v := got["follow_redirects"]; v.OK {
		switch l.FollowRedirects {
		case latency.RedirectsSameHost, latency.RedirectsAny, latency.RedirectsNone:
		default:
			errs.Addf(v.Line, "latency_source.follow_redirects %q is not one of same-host, any, none", l.FollowRedirects)
		}
	}
	if l.URL == "" {
		errs.Addf(n.Line, "latency_source needs a url")
	}
	if l.Preset == "" && l.Metric == "" {
		errs.Addf(n.Line, "latency_source needs a preset or a metric (histogram name)")
	}
	if l.Preset == latency.PresetTriton && l.Metric != "" {
		errs.Addf(l.keys.Line("metric", n.Line), "latency_source.metric %q: preset triton reads fixed counters; drop metric or the preset", l.Metric)
	}
	return errs.Err()
}
