package tenant

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-kit/log/level"
)

// shareEpsilon absorbs floating-point error in a sum of share.min values
// (0.1+0.2+0.7 is 1.0000000000000002): a sum is over-committed only above
// 1+shareEpsilon.
const shareEpsilon = 1e-9

// maxShareLogged bounds the over-commitments remembered as logged; past it
// the memory starts over (and each is logged once more).
const maxShareLogged = 10000

// shareDomain identifies a share domain: a GPU, or one MIG GPU instance of
// it ("" gi for the GPU itself).
type shareDomain struct{ uuid, gi string }

// shareSums sums, for each GPU and each MIG instance separately, the
// share.min of the tenants with usage there. It returns every domain where
// at least one such tenant has a share.min above 0, and those whose sum is
// above 1; each over-commitment of a domain by a set of tenants is logged
// once (again after a reload). Called with buildMu held.
func (b *Builder) shareSums(compiled *compiledConfig, usage []Usage) (all, over []ShareMinSum) {
	if len(compiled.minShare) == 0 {
		return nil, nil
	}
	idx := map[shareDomain]int{}
	for i := range usage {
		u := &usage[i]
		m := compiled.minShare[u.Tenant]
		if m <= 0 {
			continue
		}
		d := shareDomain{u.UUID, u.GPUInstance}
		j, ok := idx[d]
		if !ok {
			j = len(all)
			idx[d] = j
			all = append(all, ShareMinSum{GPU: u.GPU, UUID: u.UUID, GPUInstance: u.GPUInstance})
		}
		if !slices.Contains(all[j].Tenants, u.Tenant) {
			all[j].Tenants = append(all[j].Tenants, u.Tenant)
		}
	}
	for i := range all {
		s := &all[i]
		sort.Strings(s.Tenants)
		for _, t := range s.Tenants {
			s.MinSum += compiled.minShare[t]
		}
		if s.MinSum <= 1+shareEpsilon {
			continue
		}
		over = append(over, *s)
		tenants := strings.Join(s.Tenants, ",")
		key := s.UUID + "|" + s.GPUInstance + "|" + tenants
		if b.attr.shareLogged[key] {
			continue
		}
		if len(b.attr.shareLogged) >= maxShareLogged {
			b.attr.shareLogged = map[string]bool{}
		}
		b.attr.shareLogged[key] = true
		kv := []any{"msg", "share.min guarantees of the tenants on one GPU add up to more than 1; they cannot all be met",
			"gpu", s.GPU, "uuid", s.UUID}
		if s.GPUInstance != "" {
			kv = append(kv, "gpu_instance", s.GPUInstance)
		}
		kv = append(kv, "tenants", tenants, "min_sum", strconv.FormatFloat(s.MinSum, 'g', 4, 64))
		level.Warn(b.logger).Log(kv...)
	}
	return all, over
}
