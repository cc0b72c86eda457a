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
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Tenant classes.
const (
	ClassLatency    = "latency"
	ClassBatch      = "batch"
	ClassBestEffort = "best-effort"
)

// Latency source presets.
const (
	PresetVLLME2E  = "vllm-e2e"
	PresetVLLMTTFT = "vllm-ttft"
	PresetVLLMITL  = "vllm-itl"
	PresetTriton   = "triton"
	PresetTGI      = "tgi"
)

// Defaults applied when the tenants file does not set them.
const (
	DefaultSLOWindow      = 5 * time.Minute
	DefaultScrapeInterval = 15 * time.Second
	DefaultSourceTimeout  = 2 * time.Second
	DefaultSourceMaxBytes = 4 << 20
)

// Config is a parsed and validated tenants file. A Config with no tenants is
// valid: everything is then attributed to Unassigned.
type Config struct {
	// File is the path the configuration was read from ("" when none).
	File     string
	Tenants  []Tenant
	Defaults Defaults
}

// Defaults are the file-wide settings.
type Defaults struct {
	SLOWindow      time.Duration // sliding window of SLO figures
	ScrapeInterval time.Duration // how often latency sources are scraped
}

// Tenant is one configured tenant.
type Tenant struct {
	Name     string
	Class    string // ClassLatency, ClassBatch or ClassBestEffort
	Priority int
	// Selectors: a process or instance belongs to the tenant if any entry
	// matches; the keys inside one entry must all match.
	Selectors     []Selector
	SLO           *SLO           // nil when none
	Share         *Share         // nil when none
	LatencySource *LatencySource // nil when none
	// Line is where the tenant is defined in the file.
	Line int
}

// Selector is one entry of a tenant's selectors. Empty fields are not
// constrained; at least one field is set.
type Selector struct {
	Kubernetes  *KubernetesSelector
	Cgroup      string // glob on the cgroup path ('*' also matches '/')
	MIGUUID     string
	GPUInstance *GPUInstanceRef
	VGPU        *VGPUSelector
	Executable  string // glob on the executable name
	UID         *int
	Line        int

	cgroupRE *glob
	exeRE    *glob
}

// KubernetesSelector matches the pod a process or device belongs to.
type KubernetesSelector struct {
	Namespace string            // exact
	Pod       string            // glob on the pod name
	PodUID    string            // exact
	Container string            // glob on the container name
	Labels    map[string]string // all must be equal (needs pod metadata)

	podRE       *glob
	containerRE *glob
}

// GPUInstanceRef names a MIG GPU instance by device index and GPU instance ID.
type GPUInstanceRef struct {
	GPU int
	ID  int
}

// VGPUSelector matches a vGPU instance.
type VGPUSelector struct {
	UUID   string // exact
	VMName string // glob

	vmRE *glob
}

// SLO is a latency objective: Quantile of requests complete within Target.
type SLO struct {
	Quantile      float64
	Target        time.Duration
	MinThroughput float64       // requests per second floor; 0 = none
	Window        time.Duration // defaults.slo_window unless set
}

// Share is the tuner's bounds for a tenant's share of the GPU (or MIG
// instance) it runs on (0-1): Min is its guarantee there, Max its cap.
type Share struct {
	Min, Max float64
}

// LatencySource is where a tenant's request latency is read.
type LatencySource struct {
	URL      string // http(s)://... or sim://<app>
	Preset   string // one of the Preset* names, or ""
	Metric   string // histogram name when no preset (overrides the preset's)
	Matchers map[string]string
	Timeout  time.Duration
	MaxBytes int64
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
	fmt.Fprintf(&b, "%s|%s|%s|%s|%d", l.URL, l.Preset, l.Metric, l.Timeout, l.MaxBytes)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, l.Matchers[k])
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

// EmptyConfig is the configuration used when no tenants file is given.
func EmptyConfig() *Config {
	return &Config{Defaults: Defaults{SLOWindow: DefaultSLOWindow, ScrapeInterval: DefaultScrapeInterval}}
}

// LoadConfig reads and validates a tenants file. The error lists every
// problem found, one per line, as "file:line: problem".
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // "open <path>: <reason>" names the file
	}
	return ParseConfig(path, data)
}

// ParseConfig parses and validates a tenants file held in data; name is used
// in error messages and as Config.File.
func ParseConfig(name string, data []byte) (*Config, error) {
	p := &parser{file: name}
	cfg := EmptyConfig()
	cfg.File = name

	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, nil // an empty file: no tenants
		}
		return nil, fmt.Errorf("%s:%s", name, yamlErrText(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: only one YAML document is allowed", name, extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return cfg, nil
		}
		root = root.Content[0]
	}
	p.parseRoot(root, cfg)
	if p.problems == 0 {
		p.validate(cfg)
	}
	if p.problems > 0 {
		return nil, p.err()
	}
	return cfg, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlErrText turns a yaml.v3 syntax error into "line: problem".
func yamlErrText(err error) string {
	msg := strings.TrimSpace(err.Error())
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if m[1] != "" {
			return m[1] + ": " + m[2]
		}
		return "1: " + m[2]
	}
	return "1: " + msg
}

// Limits that keep a small file from costing much: YAML aliases can repeat
// a tenant or a selector any number of times, and every pair of selectors
// of two tenants is checked for overlap.
const (
	maxAliases   = 1000  // alias references (*name) followed in one file
	maxTenants   = 1000  // tenants in one file
	maxSelectors = 10000 // selectors of all tenants together
	maxErrors    = 100   // problems listed; the rest are counted
)

type parser struct {
	file      string
	errs      []string
	seen      map[string]bool // errs, to list each problem once
	problems  int             // problems found, listed or not
	dropped   int             // problems not listed beyond maxErrors
	firstDrop int             // line of the first of those
	aliases   int
	selectors int
}

func (p *parser) errorf(line int, format string, args ...any) {
	if line <= 0 {
		line = 1
	}
	p.problems++
	msg := fmt.Sprintf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
	if p.seen[msg] {
		return // the same problem again, through an alias
	}
	if len(p.errs) >= maxErrors {
		if p.dropped == 0 {
			p.firstDrop = line
		}
		p.dropped++
		return
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[msg] = true
	p.errs = append(p.errs, msg)
}

// full reports whether no further problem would be listed.
func (p *parser) full() bool { return len(p.errs) >= maxErrors }

func (p *parser) err() error {
	errs := p.errs
	if p.dropped > 0 {
		errs = append(errs[:len(errs):len(errs)], fmt.Sprintf("%s:%d: further problems from here on not listed", p.file, p.firstDrop))
	}
	return errors.New(strings.Join(errs, "\n"))
}

// resolve follows alias nodes to what they name. Past maxAliases
// references it reports the alias and returns a null node in its place.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		p.aliases++
		if p.aliases > maxAliases {
			if p.aliases == maxAliases+1 {
				p.errorf(n.Line, "more than %d alias references (*%s); the file repeats itself too much", maxAliases, n.Value)
			}
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
		}
		n = n.Alias
	}
	return n
}

// fields walks a mapping node, calling fn for each known key and reporting
// unknown or duplicate keys.
func (p *parser) fields(n *yaml.Node, what string, known map[string]bool, fn func(key string, k, v *yaml.Node)) bool {
	n = p.resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return true
		}
		p.errorf(lineOf(n), "%s must be a mapping", what)
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.resolve(n.Content[i]), p.resolve(n.Content[i+1])
		key := k.Value
		if key == "<<" {
			p.errorf(k.Line, "merge keys (<<) are not supported in %s", what)
			continue
		}
		if !known[key] {
			p.errorf(k.Line, "unknown key %q in %s (known: %s)", key, what, knownList(known))
			continue
		}
		if seen[key] {
			p.errorf(k.Line, "key %q given twice in %s", key, what)
			continue
		}
		seen[key] = true
		fn(key, k, v)
	}
	return true
}

func knownList(known map[string]bool) string {
	ks := make([]string, 0, len(known))
	for k := range known {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func lineOf(n *yaml.Node) int {
	if n == nil {
		return 1
	}
	return n.Line
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n.Line, "%s must be a string", what)
		return "", false
	}
	return n.Value, true
}

func (p *parser) integer(n *yaml.Node, what string) (int, bool) {
	if n.Kind == yaml.ScalarNode {
		if v, err := strconv.ParseInt(n.Value, 0, 32); err == nil {
			return int(v), true
		}
	}
	p.errorf(n.Line, "%s must be an integer, got %q", what, n.Value)
	return 0, false
}

func (p *parser) number(n *yaml.Node, what string) (float64, bool) {
	if n.Kind == yaml.ScalarNode {
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, true
		}
	}
	p.errorf(n.Line, "%s must be a number, got %q", what, n.Value)
	return 0, false
}

// duration accepts Go durations ("250ms", "1m30s") and Prometheus ones ("1d").
func (p *parser) duration(n *yaml.Node, what string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode {
		if d, err := time.ParseDuration(n.Value); err == nil {
			return d, true
		}
		if d, err := model.ParseDuration(n.Value); err == nil {
			return time.Duration(d), true
		}
	}
	p.errorf(n.Line, "%s: bad duration %q (use e.g. 250ms, 2s, 5m)", what, n.Value)
	return 0, false
}

func (p *parser) strMap(n *yaml.Node, what string) map[string]string {
	n = p.resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%s must be a mapping of names to values", what)
		return nil
	}
	m := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.resolve(n.Content[i]), p.resolve(n.Content[i+1])
		if _, dup := m[k.Value]; dup {
			p.errorf(k.Line, "key %q given twice in %s", k.Value, what)
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			p.errorf(v.Line, "%s: value of %q must be a string", what, k.Value)
			continue
		}
		m[k.Value] = v.Value
	}
	return m
}

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B?|B)?\s*$`)

// parseSize reads "4MiB", "512KiB", "1GB", "1048576".
func parseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("bad size %q (use e.g. 4MiB, 512KiB, 1048576)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	mult := 1.0
	unit := strings.TrimSuffix(m[2], "B")
	base := 1000.0
	if strings.HasSuffix(unit, "i") {
		base = 1024
		unit = strings.TrimSuffix(unit, "i")
	}
	switch unit {
	case "K":
		mult = base
	case "M":
		mult = base * base
	case "G":
		mult = base * base * base
	case "T":
		mult = base * base * base * base
	}
	v *= mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return int64(v), nil
}

func (p *parser) parseRoot(n *yaml.Node, cfg *Config) {
	p.fields(n, "the tenants file", set("tenants", "defaults"), func(key string, k, v *yaml.Node) {
		switch key {
		case "tenants":
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				return
			}
			if v.Kind != yaml.SequenceNode {
				p.errorf(v.Line, "tenants must be a list")
				return
			}
			if len(v.Content) > maxTenants {
				p.errorf(v.Line, "%d tenants; at most %d are supported", len(v.Content), maxTenants)
				return
			}
			for _, tn := range v.Content {
				cfg.Tenants = append(cfg.Tenants, p.parseTenant(p.resolve(tn)))
			}
		case "defaults":
			p.fields(v, "defaults", set("slo_window", "scrape_interval"), func(key string, k, v *yaml.Node) {
				d, ok := p.duration(v, "defaults."+key)
				if !ok {
					return
				}
				if d <= 0 {
					p.errorf(v.Line, "defaults.%s must be positive", key)
					return
				}
				if key == "slo_window" {
					cfg.Defaults.SLOWindow = d
				} else {
					cfg.Defaults.ScrapeInterval = d
				}
			})
		}
	})
}

func (p *parser) parseTenant(n *yaml.Node) Tenant {
	t := Tenant{Line: n.Line, Class: ClassBestEffort}
	known := set("name", "class", "priority", "selectors", "slo", "share", "latency_source")
	p.fields(n, "a tenant", known, func(key string, k, v *yaml.Node) {
		switch key {
		case "name":
			t.Name, _ = p.str(v, "name")
		case "class":
			c, ok := p.str(v, "class")
			if !ok {
				return
			}
			switch c {
			case ClassLatency, ClassBatch, ClassBestEffort:
				t.Class = c
			default:
				p.errorf(v.Line, "class %q is not one of latency, batch, best-effort", c)
			}
		case "priority":
			t.Priority, _ = p.integer(v, "priority")
		case "selectors":
			if v.Kind != yaml.SequenceNode {
				p.errorf(v.Line, "selectors must be a list")
				return
			}
			for _, sn := range v.Content {
				if p.selectors += 1; p.selectors > maxSelectors {
					if p.selectors == maxSelectors+1 {
						p.errorf(sn.Line, "more than %d selectors in the file", maxSelectors)
					}
					return
				}
				if s, ok := p.parseSelector(p.resolve(sn)); ok {
					t.Selectors = append(t.Selectors, s)
				}
			}
		case "slo":
			t.SLO = p.parseSLO(v)
		case "share":
			t.Share = p.parseShare(v)
		case "latency_source":
			t.LatencySource = p.parseSource(v)
		}
	})
	return t
}

func (p *parser) parseSelector(n *yaml.Node) (Selector, bool) {
	s := Selector{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "a selector must be a mapping (e.g. {executable: vllm})")
		return s, false
	}
	if len(n.Content) == 0 {
		p.errorf(n.Line, "a selector has no keys; it would match nothing")
		return s, false
	}
	nerr := p.problems
	known := set("kubernetes", "cgroup", "mig_uuid", "gpu_instance", "vgpu", "executable", "uid")
	p.fields(n, "a selector", known, func(key string, k, v *yaml.Node) {
		switch key {
		case "kubernetes":
			ks := &KubernetesSelector{}
			p.fields(v, "kubernetes selector", set("namespace", "pod", "pod_uid", "container", "labels"), func(key string, k, v *yaml.Node) {
				switch key {
				case "namespace":
					ks.Namespace, _ = p.str(v, "kubernetes.namespace")
				case "pod":
					ks.Pod, _ = p.str(v, "kubernetes.pod")
				case "pod_uid":
					ks.PodUID, _ = p.str(v, "kubernetes.pod_uid")
				case "container":
					ks.Container, _ = p.str(v, "kubernetes.container")
				case "labels":
					ks.Labels = p.strMap(v, "kubernetes.labels")
				}
			})
			if ks.Namespace == "" && ks.Pod == "" && ks.PodUID == "" && ks.Container == "" && len(ks.Labels) == 0 {
				p.errorf(v.Line, "kubernetes selector has no keys (namespace, pod, pod_uid, container, labels)")
			}
			ks.podRE, ks.containerRE = compileGlob(ks.Pod), compileGlob(ks.Container)
			s.Kubernetes = ks
		case "cgroup":
			s.Cgroup, _ = p.str(v, "cgroup")
			if s.Cgroup == "" {
				p.errorf(v.Line, "cgroup glob is empty")
			}
			s.cgroupRE = compileGlob(s.Cgroup)
		case "mig_uuid":
			s.MIGUUID, _ = p.str(v, "mig_uuid")
			if s.MIGUUID == "" {
				p.errorf(v.Line, "mig_uuid is empty")
			}
		case "gpu_instance":
			g := &GPUInstanceRef{GPU: -1, ID: -1}
			p.fields(v, "gpu_instance", set("gpu", "id"), func(key string, k, v *yaml.Node) {
				x, ok := p.integer(v, "gpu_instance."+key)
				if ok && x < 0 {
					p.errorf(v.Line, "gpu_instance.%s must not be negative", key)
				}
				if key == "gpu" {
					g.GPU = x
				} else {
					g.ID = x
				}
			})
			if g.GPU < 0 || g.ID < 0 {
				p.errorf(v.Line, "gpu_instance needs both gpu and id")
			}
			s.GPUInstance = g
		case "vgpu":
			vs := &VGPUSelector{}
			p.fields(v, "vgpu selector", set("uuid", "vm_name"), func(key string, k, v *yaml.Node) {
				if key == "uuid" {
					vs.UUID, _ = p.str(v, "vgpu.uuid")
				} else {
					vs.VMName, _ = p.str(v, "vgpu.vm_name")
				}
			})
			if vs.UUID == "" && vs.VMName == "" {
				p.errorf(v.Line, "vgpu selector needs uuid or vm_name")
			}
			vs.vmRE = compileGlob(vs.VMName)
			s.VGPU = vs
		case "executable":
			s.Executable, _ = p.str(v, "executable")
			if s.Executable == "" {
				p.errorf(v.Line, "executable is empty")
			}
			s.exeRE = compileGlob(s.Executable)
		case "uid":
			u, ok := p.integer(v, "uid")
			if ok && u < 0 {
				p.errorf(v.Line, "uid must not be negative")
			}
			s.UID = &u
		}
	})
	return s, p.problems == nerr
}

func (p *parser) parseSLO(n *yaml.Node) *SLO {
	s := &SLO{}
	haveQ, haveT := false, false
	p.fields(n, "slo", set("quantile", "target", "min_throughput", "window"), func(key string, k, v *yaml.Node) {
		switch key {
		case "quantile":
			q, ok := p.number(v, "slo.quantile")
			if ok && (q <= 0 || q >= 1) {
				p.errorf(v.Line, "slo.quantile %v is outside (0,1)", q)
			}
			s.Quantile, haveQ = q, true
		case "target":
			d, ok := p.duration(v, "slo.target")
			if ok && d <= 0 {
				p.errorf(v.Line, "slo.target must be > 0, got %s", v.Value)
			}
			s.Target, haveT = d, true
		case "min_throughput":
			x, ok := p.number(v, "slo.min_throughput")
			if ok && x < 0 {
				p.errorf(v.Line, "slo.min_throughput must not be negative")
			}
			s.MinThroughput = x
		case "window":
			d, ok := p.duration(v, "slo.window")
			if ok && d <= 0 {
				p.errorf(v.Line, "slo.window must be positive")
			}
			s.Window = d
		}
	})
	if !haveQ {
		p.errorf(n.Line, "slo needs a quantile (e.g. 0.99)")
	}
	if !haveT {
		p.errorf(n.Line, "slo needs a target latency (e.g. 250ms)")
	}
	return s
}

func (p *parser) parseShare(n *yaml.Node) *Share {
	s := &Share{Min: 0, Max: 1}
	p.fields(n, "share", set("min", "max"), func(key string, k, v *yaml.Node) {
		x, ok := p.number(v, "share."+key)
		if ok && (x < 0 || x > 1) {
			p.errorf(v.Line, "share.%s %v is outside [0,1]", key, x)
		}
		if key == "min" {
			s.Min = x
		} else {
			s.Max = x
		}
	})
	if s.Min > s.Max {
		p.errorf(n.Line, "share.min %v is greater than share.max %v", s.Min, s.Max)
	}
	return s
}

func (p *parser) parseSource(n *yaml.Node) *LatencySource {
	l := &LatencySource{Timeout: DefaultSourceTimeout, MaxBytes: DefaultSourceMaxBytes}
	known := set("url", "preset", "metric", "matchers", "timeout", "max_bytes")
	p.fields(n, "latency_source", known, func(key string, k, v *yaml.Node) {
		switch key {
		case "url":
			l.URL, _ = p.str(v, "latency_source.url")
			u, err := url.Parse(l.URL)
			switch {
			case err != nil:
				p.errorf(v.Line, "latency_source.url %q: %v", l.URL, err)
			case u.Scheme == "http" || u.Scheme == "https":
				if u.Host == "" {
					p.errorf(v.Line, "latency_source.url %q has no host", l.URL)
				}
			case u.Scheme == "sim":
				if simApp(l.URL) == "" {
					p.errorf(v.Line, "latency_source.url %q names no application (sim://<app>)", l.URL)
				}
			default:
				p.errorf(v.Line, "latency_source.url %q: scheme must be http, https or sim", l.URL)
			}
		case "preset":
			l.Preset, _ = p.str(v, "latency_source.preset")
			switch l.Preset {
			case PresetVLLME2E, PresetVLLMTTFT, PresetVLLMITL, PresetTriton, PresetTGI:
			default:
				p.errorf(v.Line, "unknown latency_source.preset %q (known: vllm-e2e, vllm-ttft, vllm-itl, triton, tgi)", l.Preset)
			}
		case "metric":
			l.Metric, _ = p.str(v, "latency_source.metric")
			if !model.LegacyValidation.IsValidMetricName(l.Metric) && !model.UTF8Validation.IsValidMetricName(l.Metric) {
				p.errorf(v.Line, "latency_source.metric %q is not a valid metric name", l.Metric)
			}
		case "matchers":
			l.Matchers = p.strMap(v, "latency_source.matchers")
		case "timeout":
			d, ok := p.duration(v, "latency_source.timeout")
			if ok && d <= 0 {
				p.errorf(v.Line, "latency_source.timeout must be positive")
			}
			l.Timeout = d
		case "max_bytes":
			var sz int64
			var err error
			if v.Kind != yaml.ScalarNode {
				err = fmt.Errorf("must be a size")
			} else {
				sz, err = parseSize(v.Value)
			}
			if err != nil {
				p.errorf(v.Line, "latency_source.max_bytes: %v", err)
				return
			}
			if sz < 1024 {
				p.errorf(v.Line, "latency_source.max_bytes %s is below 1KiB", v.Value)
			}
			l.MaxBytes = sz
		}
	})
	if l.URL == "" {
		p.errorf(n.Line, "latency_source needs a url")
	}
	if l.Preset == "" && l.Metric == "" {
		p.errorf(n.Line, "latency_source needs a preset or a metric (histogram name)")
	}
	if l.Preset == PresetTriton && l.Metric != "" {
		p.errorf(n.Line, "latency_source: preset triton reads fixed counters; drop metric or the preset")
	}
	return l
}

// simApp returns the application of a sim://app URL.
func simApp(u string) string {
	if !strings.HasPrefix(u, "sim://") {
		return ""
	}
	return strings.Trim(strings.TrimPrefix(u, "sim://"), "/")
}

// validate checks what needs the whole file: names, impossible SLOs,
// selectors that provably overlap. The tenants' share.min values are not
// summed here: a guarantee holds on the GPU (or MIG instance) the tenant
// runs on, and which tenants share one is known only at attribution time,
// where Build checks the sum per GPU and instance (see shares.go).
func (p *parser) validate(cfg *Config) {
	names := map[string]int{}
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		switch {
		case t.Name == "":
			p.errorf(t.Line, "tenant has no name")
		case t.Name == Unassigned:
			p.errorf(t.Line, "tenant name %q is reserved for usage that matches no tenant", Unassigned)
		case !validName(t.Name):
			p.errorf(t.Line, "tenant name %q: use letters, digits, '_', '-', '.'", t.Name)
		}
		if first, dup := names[t.Name]; dup && t.Name != "" {
			p.errorf(t.Line, "duplicate tenant name %q (first defined at line %d)", t.Name, first)
		} else {
			names[t.Name] = t.Line
		}
		if len(t.Selectors) == 0 {
			p.errorf(t.Line, "tenant %q has no selectors; nothing could be attributed to it", t.Name)
		}
		if s := t.SLO; s != nil {
			if s.Window == 0 {
				s.Window = cfg.Defaults.SLOWindow
			}
			if t.LatencySource == nil {
				p.errorf(t.Line, "tenant %q has an slo but no latency_source to measure it", t.Name)
			}
			if s.Target >= s.Window {
				p.errorf(t.Line, "tenant %q: slo.target %s is not shorter than the SLO window %s; it cannot be observed", t.Name, s.Target, s.Window)
			}
			if s.Window < 2*cfg.Defaults.ScrapeInterval {
				p.errorf(t.Line, "tenant %q: SLO window %s holds fewer than two scrapes at scrape_interval %s", t.Name, s.Window, cfg.Defaults.ScrapeInterval)
			}
			if s.MinThroughput > 0 && s.Quantile > 0 && s.Quantile < 1 {
				// With fewer than 1/(1-q) requests in a window, a single slow
				// request breaks the objective: the quantile is not defined
				// by the data. Such a floor makes the SLO unmeasurable.
				need := 1 / (1 - s.Quantile)
				if got := s.MinThroughput * s.Window.Seconds(); got < need {
					p.errorf(t.Line, "tenant %q: min_throughput %v req/s gives %.0f requests per %s window, fewer than the %.0f a %v quantile needs", t.Name, s.MinThroughput, got, s.Window, need, s.Quantile)
				}
			}
		}
		if t.LatencySource != nil && t.SLO != nil && t.LatencySource.Timeout >= cfg.Defaults.ScrapeInterval {
			p.errorf(t.Line, "tenant %q: latency_source.timeout %s must be shorter than scrape_interval %s", t.Name, t.LatencySource.Timeout, cfg.Defaults.ScrapeInterval)
		}
	}
	p.checkOverlaps(cfg)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func validName(s string) bool { return nameRE.MatchString(s) }

// checkOverlaps reports selectors of different tenants that provably match
// the same process or instance: selector A covers selector B when every key
// A constrains is constrained by B to a value A accepts; then whatever
// matches B matches A.
func (p *parser) checkOverlaps(cfg *Config) {
	for i := range cfg.Tenants {
		for j := i + 1; j < len(cfg.Tenants); j++ {
			a, b := &cfg.Tenants[i], &cfg.Tenants[j]
			for _, sa := range a.Selectors {
				if p.full() {
					// the file is rejected; further overlaps would not be listed
					p.errorf(sa.Line, "overlaps not checked further")
					return
				}
				for _, sb := range b.Selectors {
					if covers(&sa, &sb) || covers(&sb, &sa) {
						p.errorf(sb.Line, "selector of tenant %q overlaps the selector of tenant %q at line %d: the same process would belong to both", b.Name, a.Name, sa.Line)
					}
				}
			}
		}
	}
}

// covers reports whether everything matching b also matches a.
func covers(a, b *Selector) bool {
	globCovers := func(ga string, gre *glob, gb string) bool {
		if ga == "" {
			return true
		}
		if gb == "" {
			return false
		}
		if ga == gb {
			return true
		}
		// a literal b value accepted by a's glob
		return !hasGlobMeta(gb) && gre != nil && gre.match(gb)
	}
	if a.Cgroup != "" && !globCovers(a.Cgroup, a.cgroupRE, b.Cgroup) {
		return false
	}
	if a.Executable != "" && !globCovers(a.Executable, a.exeRE, b.Executable) {
		return false
	}
	if a.MIGUUID != "" && a.MIGUUID != b.MIGUUID {
		return false
	}
	if a.GPUInstance != nil && (b.GPUInstance == nil || *a.GPUInstance != *b.GPUInstance) {
		return false
	}
	if a.UID != nil && (b.UID == nil || *a.UID != *b.UID) {
		return false
	}
	if av := a.VGPU; av != nil {
		bv := b.VGPU
		if bv == nil {
			return false
		}
		if av.UUID != "" && av.UUID != bv.UUID {
			return false
		}
		if av.VMName != "" && !globCovers(av.VMName, av.vmRE, bv.VMName) {
			return false
		}
	}
	if ak := a.Kubernetes; ak != nil {
		bk := b.Kubernetes
		if bk == nil {
			return false
		}
		if ak.Namespace != "" && ak.Namespace != bk.Namespace {
			return false
		}
		if ak.PodUID != "" && ak.PodUID != bk.PodUID {
			return false
		}
		if ak.Pod != "" && !globCovers(ak.Pod, ak.podRE, bk.Pod) {
			return false
		}
		if ak.Container != "" && !globCovers(ak.Container, ak.containerRE, bk.Container) {
			return false
		}
		for k, v := range ak.Labels {
			if bk.Labels[k] != v {
				return false
			}
		}
	}
	// b must be satisfiable by one subject: a MIG instance selector and a
	// vGPU selector cannot both hold.
	if (b.MIGUUID != "" || b.GPUInstance != nil) && b.VGPU != nil {
		return false
	}
	return true
}

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// glob is a compiled glob pattern: '*' matches any run of characters ('/'
// included), '?' one character, "[...]" a class ("[!...]" negated).
type glob struct {
	pat string
	re  *regexp.Regexp // patterns with classes; nil for '*' and '?' only
}

// compileGlob compiles g; "" gives nil, which matches everything.
func compileGlob(g string) *glob {
	if g == "" {
		return nil
	}
	if !strings.Contains(g, "[") {
		return &glob{pat: g}
	}
	return &glob{pat: g, re: globRegexp(g)}
}

// match reports whether s matches the whole pattern.
func (g *glob) match(s string) bool {
	if g.re != nil {
		return g.re.MatchString(s)
	}
	return wildMatch(g.pat, s)
}

// wildMatch matches '*' and '?' wildcards by backtracking to the last star,
// in time linear in len(p)*len(s) at worst and without allocation.
func wildMatch(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					_, n := utf8.DecodeRuneInString(s[sx:])
					px++
					sx += n
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			_, n := utf8.DecodeRuneInString(s[starSx:])
			starSx += n
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}

// globRegexp turns a glob into an anchored regexp.
func globRegexp(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" {
				b.WriteString(regexp.QuoteMeta(g[i : i+2+j]))
			} else {
				b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			}
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return regexp.MustCompile("^" + regexp.QuoteMeta(g) + "$")
	}
	return re
}

func globMatch(g *glob, s string) bool { return g == nil || g.match(s) }
