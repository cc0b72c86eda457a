package tenant

import "github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"

// maxOverlapSteps bounds the work of matching globs against literal values
// in the overlap check of one file, in steps of glob matching (about a
// second): a glob's match against a literal can cost the product of their
// lengths, and every glob is matched against the literals of the other
// tenants' selectors.
const maxOverlapSteps = 1 << 28

// checkOverlaps reports selectors of different tenants that provably match
// the same process or instance: selector A covers selector B when every key
// A constrains is constrained by B to a value A accepts; then whatever
// matches B matches A. A file whose globs and literal values cost more than
// maxOverlapSteps to compare is rejected.
func checkOverlaps(errs *yamlconf.Errors, cfg *Config) {
	budget := maxOverlapSteps
	for i := range cfg.Tenants {
		for j := i + 1; j < len(cfg.Tenants); j++ {
			a, b := &cfg.Tenants[i], &cfg.Tenants[j]
			for ia := range a.Selectors {
				sa := &a.Selectors[ia]
				if errs.Full() {
					// the file is rejected; further overlaps would not be listed
					errs.Addf(sa.Line, "overlaps not checked further")
					return
				}
				for ib := range b.Selectors {
					sb := &b.Selectors[ib]
					overlap := covers(sa, sb, &budget) || covers(sb, sa, &budget)
					if budget < 0 {
						errs.Addf(sb.Line, "the globs and names of the selectors cost too much to check for overlaps (more than %d steps of matching); shorten the globs or names", maxOverlapSteps)
						return
					}
					if overlap {
						errs.Addf(sb.Line, "selector of tenant %q overlaps the selector of tenant %q at line %d: the same process would belong to both", b.Name, a.Name, sa.Line)
					}
				}
			}
		}
	}
}

// covers reports whether everything matching b also matches a; the steps
// of glob matching it takes come off budget (past it: false).
func covers(a, b *Selector, budget *int) bool {
	// globCovers: a glob (nil: none) accepts all that gb does: the same
	// glob, or a literal it matches
	globCovers := func(ga, gb *glob) bool {
		switch {
		case ga == nil:
			return true
		case gb == nil:
			return false
		case ga.pat == gb.pat:
			return true
		case !ga.meta || gb.meta:
			return false
		}
		ok, steps := ga.matchWithin(gb.pat, *budget)
		*budget -= steps
		return ok
	}
	if !globCovers(a.cgroupRE, b.cgroupRE) || !globCovers(a.exeRE, b.exeRE) {
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
		if !globCovers(av.vmRE, bv.vmRE) {
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
		if !globCovers(ak.podRE, bk.podRE) || !globCovers(ak.containerRE, bk.containerRE) {
			return false
		}
		for k, v := range ak.Labels {
			// a label a requires is b's too, with a's value (a label
			// given "" is one present with an empty value, which a pod
			// without the label does not have)
			if bv, ok := bk.Labels[k]; !ok || bv != v {
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
