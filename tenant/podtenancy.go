package tenant

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// PodTenancy says which tenant a Kubernetes pod goes to when no tenant of
// the tenants file matches it: none (the zero value: Unassigned), one per
// namespace, or one per value of a pod label. A tenants file, when given,
// comes first: a pod its selectors match goes to its tenant.
type PodTenancy struct {
	// ByNamespace: the pod's namespace is its tenant.
	ByNamespace bool
	// Label, when set, names the pod label whose value is the pod's tenant;
	// a pod without the label (or without pod metadata, which labels come
	// from) is Unassigned.
	Label string
}

// Pod tenancy as the exporter's flag spells it.
const (
	PodTenancyOff       = "off"
	PodTenancyNamespace = "namespace"
	podTenancyLabel     = "label:"
)

// ParsePodTenancy reads "namespace", "label:KEY" or "off".
func ParsePodTenancy(s string) (PodTenancy, error) {
	switch {
	case s == PodTenancyOff:
		return PodTenancy{}, nil
	case s == PodTenancyNamespace:
		return PodTenancy{ByNamespace: true}, nil
	case strings.HasPrefix(s, podTenancyLabel):
		key := strings.TrimPrefix(s, podTenancyLabel)
		if !labelKey(key) {
			return PodTenancy{}, fmt.Errorf("%q: %q is not a pod label key (e.g. app.kubernetes.io/part-of)", s, key)
		}
		return PodTenancy{Label: key}, nil
	}
	return PodTenancy{}, fmt.Errorf("%q is not one of namespace, label:KEY, off", s)
}

// String is the flag's spelling of p.
func (p PodTenancy) String() string {
	switch {
	case p.Label != "":
		return podTenancyLabel + p.Label
	case p.ByNamespace:
		return PodTenancyNamespace
	}
	return PodTenancyOff
}

// On says whether pods get a tenant without a tenants file.
func (p PodTenancy) On() bool { return p.ByNamespace || p.Label != "" }

// tenantOf is the tenant of pod; Unassigned when p is off or the pod's
// namespace (label) is unknown.
func (p PodTenancy) tenantOf(pod *kube.PodRef) string {
	if pod == nil {
		return Unassigned
	}
	var v string
	switch {
	case p.Label != "":
		v = pod.Labels[p.Label]
	case p.ByNamespace:
		v = pod.Namespace
	}
	return PodTenantName(v)
}

// PodTenantName is the tenant name of a namespace or label value, one of
// its own for each value, so that no two tenants' series become one: the
// value itself when it is a valid tenant name, as every Kubernetes
// namespace and label value is, unless it is "unassigned" or begins with
// spelt ("_00", which no Kubernetes value does: they begin with a letter
// or digit). Any other value is spelt out: spelt, then the value with
// each byte outside [A-Za-z0-9.-], "_" included, as "_" and two hex
// digits ("a/b" -> "_00a_2fb", "unassigned" -> "_00unassigned"). "" is
// Unassigned; so is a value whose name would be longer than a tenant's
// name may be (which no Kubernetes namespace or label value is): the name
// is a label of every series of the tenant. A value beginning with "-"
// (which no namespace or label value does) is spelt out too ("-rf" ->
// "_00-rf"): the tenant's name is an argument of the hooks the tuner runs
// (the MPS restart hook's first), never to be read as a flag.
func PodTenantName(v string) string {
	switch {
	case v == "" || len(v) > maxNameLen:
		return Unassigned
	case v != Unassigned && validName(v) && v[0] != '-' && !strings.HasPrefix(v, spelt):
		return v
	}
	var b strings.Builder
	b.WriteString(spelt)
	for i := 0; i < len(v) && b.Len() <= maxNameLen; i++ {
		if c := v[i]; nameByte(c) && c != '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	if b.Len() > maxNameLen {
		return Unassigned
	}
	return b.String()
}

// spelt begins a spelt-out tenant name: "_" and the hex digits of a NUL
// byte. A valid name that begins so is spelt out too, so that no value
// taken as it is reads as another's spelt-out name.
const spelt = "_00"

// labelKey says whether key is a Kubernetes label key: an optional DNS
// prefix of at most 253 bytes and a name of at most 63.
func labelKey(key string) bool {
	prefix, name, ok := strings.Cut(key, "/")
	if !ok {
		prefix, name = "", key
	}
	return len(prefix) <= 253 && len(name) <= 63 && labelKeyRE.MatchString(key)
}

// labelKeyRE is a Kubernetes label key's form: an optional DNS prefix (a
// subdomain: dot-separated labels that begin and end with a letter or
// digit) and a name.
var labelKeyRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// nameByte says whether c may appear in a tenant name.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// classOf is a tenant's class: the file's, best-effort for a tenant of the
// pod tenancy, none for Unassigned.
func (c *compiledConfig) classOf(tenant string) gpu.TenantClass {
	if cl, ok := c.class[tenant]; ok || tenant == Unassigned {
		return cl
	}
	return gpu.ClassBestEffort
}

// podTenants are the tenants of usage that the pod tenancy made (neither
// the file's nor Unassigned), ascending, as best-effort tenants with no
// share bounds.
func podTenants(c *compiledConfig, usage []Usage) []Info {
	seen := map[string]bool{}
	var out []Info
	for _, u := range usage {
		if _, ok := c.class[u.Tenant]; ok || u.Tenant == Unassigned || seen[u.Tenant] {
			continue
		}
		seen[u.Tenant] = true
		out = append(out, Info{Name: u.Tenant, Class: gpu.ClassBestEffort, ShareMax: 1})
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}
