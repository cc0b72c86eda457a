package tenant

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-kit/log/level"
)

// sharePrecision is the precision a sum of share.min values is rounded to,
// absorbing floating-point error (0.34+0.56+0.1 adds up to
// 1.0000000000000002): the rounded sum is both what is served and what is
// judged, so a sum of exactly 1 is served as 1 and is not over-committed.
const sharePrecision = 1e-9

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
		s.MinSum = roundShare(s.MinSum)
		if s.MinSum <= 1 {
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
		kv = append(kv, "tenants", tenants, "min_sum", strconv.FormatFloat(s.MinSum, 'g', -1, 64))
		level.Warn(b.logger).Log(kv...)
	}
	return all, over
}

// roundShare rounds a sum of shares to sharePrecision, to the float nearest
// to that decimal (0.9000000000000001 and 0.8999999999999999 become 0.9):
// the scaled sum rounded is an exact integer, and so is the scale, so the
// division rounds once.
func roundShare(v float64) float64 {
	const scale = 1 / sharePrecision
	return math.Round(v*scale) / scale
}

// Footprints. The per-process utilization samples count time (the fraction
// of the interval a kernel ran, or memory moved), not SMs or bytes. How
// much of the GPU a context holds while busy, its footprint, is fitted per
// GPU over the last footprintWindow samples from how the device's own
// counters move with the contexts' busy times (docs/tenants.md, Rules).

// footprintWindow is the number of samples of a GPU the footprints are
// fitted over.
const footprintWindow = 30

// maxFitContexts bounds the unknowns of the footprint fit (linearFit),
// whose cost grows with their cube: where the window holds more contexts
// (processes that came and went: short-lived jobs, restarted clients),
// those not in the latest sample are fitted as one, since only the latest
// sample's footprints are used; where the latest sample alone holds as
// many, nothing is fitted and the busy-time split is used. Without it
// 32 short-lived processes a sample on one time-sliced GPU made a fit of
// 960 unknowns: 0.48 s a sample for that GPU alone.
const maxFitContexts = 128

// footprintRidge pulls each footprint towards the common one (the
// busy-time split) in directions the samples do not determine, per sample
// of the window.
const footprintRidge = 1e-4

// minOccupancy bounds a fitted MPS occupancy from below.
const minOccupancy = 0.05

// ctxKey is a context of a GPU: a process (with the active-thread fraction
// of its context, so that a restarted MPS client is a new context) or a
// vGPU instance.
type ctxKey struct {
	id      uint64
	threads float64
}

// ctxUtil is one context's utilization in one sample.
type ctxUtil struct {
	key     ctxKey
	acc     *tenantAcc
	sm, mem *float64
	mps     bool
	// smFoot and memFoot are the fitted footprints, set by gpuFit.fit
	smFoot, memFoot float64
}

// ctxVal is a figure of one context.
type ctxVal struct {
	key ctxKey
	v   float64
}

// ctxVals are figures by context, keys ascending (cmpCtxKey).
type ctxVals []ctxVal

// add adds v to k's figure, inserting k at 0 when absent.
func (x ctxVals) add(k ctxKey, v float64) ctxVals {
	i, found := slices.BinarySearchFunc(x, k, func(e ctxVal, k ctxKey) int { return cmpCtxKey(e.key, k) })
	if !found {
		return slices.Insert(x, i, ctxVal{k, 0 + v})
	}
	x[i].v += v
	return x
}

// get returns k's figure.
func (x ctxVals) get(k ctxKey) (float64, bool) {
	i, found := slices.BinarySearchFunc(x, k, func(e ctxVal, k ctxKey) int { return cmpCtxKey(e.key, k) })
	if !found {
		return 0, false
	}
	return x[i].v, true
}

// fitSample is one sample of a GPU: its contexts' busy times and the
// device's counters (NaN when absent).
type fitSample struct {
	busy          ctxVals
	sm, occ, dram float64
}

// gpuFit is the footprint history of one GPU.
type gpuFit struct {
	samples []fitSample // oldest first, at most footprintWindow
	// occ is the last fitted occupancy of each MPS context (warm start)
	occ ctxVals
	// the occupancy fit's scratch, kept from one sample to the next
	keys []ctxKey
	obs  []occObs
	buf  []float64
	out  ctxVals
}

// occObs is an observation of the occupancy fit: a sample's device SM
// active and SM occupancy, the sums over its contexts of w o and of w o o
// (w is busy x threads, o the occupancy), and its squared error.
type occObs struct {
	sm, occ, s1, s2, e float64
}

// fitOf returns device uuid's footprint history, made when new.
func (a *attrState) fitOf(uuid string) *gpuFit {
	f := a.fits[uuid]
	if f == nil {
		f = &gpuFit{}
		a.fits[uuid] = f
	}
	return f
}

// fit sets the smFoot and memFoot of ctxs, the contexts of f's device in
// this sample, from the device's SM active, SM occupancy and DRAM active
// (any may be nil) and the window before it. It reads and changes f and
// ctxs only, so that the devices' fits may run at once.
func (f *gpuFit) fit(ctxs []*ctxUtil, sm, occ, dram *float64) {
	var busy ctxVals // the oldest sample's, when it leaves the window
	if len(f.samples) >= footprintWindow {
		busy = f.samples[0].busy[:0]
		f.samples = append(f.samples[:0], f.samples[1:]...)
	}
	s := fitSample{busy: busy, sm: orNaN(sm), occ: orNaN(occ), dram: orNaN(dram)}
	mps := false
	for _, c := range ctxs {
		if c.sm != nil {
			s.busy = s.busy.add(c.key, *c.sm)
		}
		mps = mps || c.mps
	}
	f.samples = append(f.samples, s)
	var smFoot ctxVals
	if mps {
		smFoot = f.fitOccupancy()
	} else {
		smFoot = linearFit(f.samples, func(s *fitSample) (ctxVals, float64) { return s.busy, s.sm })
	}
	for _, c := range ctxs {
		c.smFoot, c.memFoot = c.key.threads, c.key.threads
		if v, ok := smFoot.get(c.key); ok {
			c.smFoot = v
		}
	}
}

// forgetFits drops the history of GPUs not in seen.
func (a *attrState) forgetFits(seen map[string]bool) {
	for uuid := range a.fits {
		if !seen[uuid] {
			delete(a.fits, uuid)
		}
	}
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// linearFit fits, over the samples where the device figure y is known,
// y = sum over contexts of x (a busy time) times the context's footprint
// in [0, 1], least squares with a ridge towards the common footprint
// mean(y) / mean(sum x). Time-sliced contexts run one at a time, so the
// device's SM active (DRAM active) is exactly such a sum. It returns nil
// when no sample has both.
func linearFit(samples []fitSample, get func(*fitSample) (ctxVals, float64)) ctxVals {
	var keys []ctxKey
	var prev ctxVals
	for i := range samples {
		x, y := get(&samples[i])
		if !math.IsNaN(y) {
			keys, prev = appendKeys(keys, x, prev), x
		}
	}
	keys = uniqueKeys(keys)
	m := len(keys)
	// pool is the column of the contexts pooled (-1: none), see
	// maxFitContexts
	pool := -1
	if m > maxFitContexts && len(samples) > 0 {
		cur, _ := get(&samples[len(samples)-1])
		if len(cur) >= maxFitContexts {
			return nil
		}
		keys = appendKeys(keys[:0], cur, nil)
		pool = len(keys)
		m = pool + 1
	}
	n, sumY, sumX := 0, 0.0, 0.0
	ata := make([]float64, m*m)
	aty := make([]float64, m)
	row := make([]float64, m)
	for i := range samples {
		x, y := get(&samples[i])
		if math.IsNaN(y) {
			continue
		}
		n++
		sumY += y
		clear(row)
		if pool >= 0 {
			for _, e := range x {
				if p, ok := slices.BinarySearchFunc(keys, e.key, cmpCtxKey); ok {
					row[p] = e.v
				} else {
					row[pool] += e.v
				}
			}
		} else {
			p := 0
			for _, e := range x {
				p = keyAt(keys, p, e.key)
				row[p] = e.v
			}
		}
		for p := range m {
			sumX += row[p]
			if row[p] == 0 {
				continue
			}
			aty[p] += row[p] * y
			for q := range m {
				ata[p*m+q] += row[p] * row[q]
			}
		}
	}
	if n == 0 || sumX <= 0 {
		return nil
	}
	prior := min(1, sumY/sumX)
	diag := 0.0
	for p := range m {
		diag += ata[p*m+p]
	}
	lambda := footprintRidge * diag / float64(m)
	for p := range m {
		ata[p*m+p] += lambda
		aty[p] += lambda * prior
	}
	theta := boxSolve(ata, aty, m)
	out := make(ctxVals, len(keys))
	for p, k := range keys {
		out[p] = ctxVal{k, theta[p]}
	}
	return out
}

// fitOccupancy fits MPS contexts' occupancies. Oversubscribed MPS clients
// share the SMs in proportion to what their kernels occupy (active-thread
// fraction times occupancy), so a client's SM weight is busy x threads x
// occupancy. With the SM active split that way, the device's SM occupancy
// is predicted as the split's occupancy-weighted sum; each context's
// occupancy in [minOccupancy, 1] is fitted to the window's device SM
// occupancy by coordinate search, with a ridge towards the window's mean
// occupancy (occupancy / SM active). It returns threads x occupancy by
// context (until the next call), nil when the window has no SM occupancy.
func (f *gpuFit) fitOccupancy() ctxVals {
	keys, obs := f.keys[:0], f.obs[:0]
	defer func() { f.keys, f.obs = keys, obs }()
	sumSM, sumOcc := 0.0, 0.0
	var prev ctxVals
	for i := range f.samples {
		s := &f.samples[i]
		if math.IsNaN(s.sm) || math.IsNaN(s.occ) || s.sm <= 0 {
			continue
		}
		keys, prev = appendKeys(keys, s.busy, prev), s.busy
		sumSM += s.sm
		sumOcc += s.occ
		obs = append(obs, occObs{sm: s.sm, occ: s.occ})
	}
	keys = uniqueKeys(keys)
	if len(obs) == 0 {
		f.occ = f.occ[:0]
		return nil
	}
	m := len(keys)
	// wc holds busy x threads column by column: wc[p*n+t] for context p in
	// observation t
	n := len(obs)
	f.buf = slices.Grow(f.buf[:0], m*n+m)[:m*n+m]
	clear(f.buf)
	wc, o := f.buf[:m*n], f.buf[m*n:]
	t := 0
	for i := range f.samples {
		s := &f.samples[i]
		if math.IsNaN(s.sm) || math.IsNaN(s.occ) || s.sm <= 0 {
			continue
		}
		p := 0
		for _, e := range s.busy {
			p = keyAt(keys, p, e.key)
			wc[p*n+t] = e.v * e.key.threads
		}
		t++
	}
	mean := min(1, max(minOccupancy, sumOcc/sumSM))
	j := 0 // f.occ and keys are both ascending
	for p, k := range keys {
		o[p] = mean
		for j < len(f.occ) && cmpCtxKey(f.occ[j].key, k) < 0 {
			j++
		}
		if j < len(f.occ) && cmpCtxKey(f.occ[j].key, k) == 0 {
			o[p] = f.occ[j].v
		}
	}
	// per observation: sum of w o and of w o o
	for t := range n {
		x := &obs[t]
		for p := range m {
			x.s1 += wc[p*n+t] * o[p]
			x.s2 += wc[p*n+t] * o[p] * o[p]
		}
	}
	// e is each observation's squared error at the occupancies o: what
	// cost adds for it at v = o[p], and for any v where context p is idle
	// in it (w = 0; s1 and s2 then add zeros)
	for t := range obs {
		obs[t].setErr()
	}
	lambda := footprintRidge * float64(n)
	const steps = 24
	// quiet counts the contexts in a row whose search kept their
	// occupancy: after m of them every figure is what each context's last
	// search saw, so every further search would keep it too.
	quiet := 0
search:
	for range 3 {
		for p := range m {
			if quiet >= m {
				break search
			}
			col, op := wc[p*n:(p+1)*n], o[p]
			// the cost at v = o[p]: every observation adds e
			bestC := lambda * (op - mean) * (op - mean)
			for t := range obs {
				if bestC >= math.Inf(1) {
					break
				}
				bestC += obs[t].e
			}
			best := op
			for g := 0; g <= steps; g++ {
				v := minOccupancy + (1-minOccupancy)*float64(g)/steps
				if c := occCost(col, obs, lambda*(v-mean)*(v-mean), v, op, bestC); c < bestC {
					best, bestC = v, c
				}
			}
			// refine around the best point
			for h := (1 - minOccupancy) / steps; h > 1e-4; h /= 2 {
				for _, v := range [2]float64{best - h, best + h} {
					if v < minOccupancy || v > 1 {
						continue
					}
					if c := occCost(col, obs, lambda*(v-mean)*(v-mean), v, op, bestC); c < bestC {
						best, bestC = v, c
					}
				}
			}
			if best == o[p] {
				quiet++ // s1 and s2 would add zeros
				continue
			}
			quiet = 0
			for t, w := range col {
				obs[t].s1 += w * (best - o[p])
				obs[t].s2 += w * (best*best - o[p]*o[p])
			}
			o[p] = best
			for t, w := range col {
				if w != 0 {
					obs[t].setErr()
				}
			}
		}
	}
	f.occ, f.out = f.occ[:0], f.out[:0]
	for p, k := range keys {
		f.occ = append(f.occ, ctxVal{k, o[p]})
		f.out = append(f.out, ctxVal{k, k.threads * o[p]})
	}
	return f.out
}

// occCost is fitOccupancy's cost of a context at occupancy v, or some
// figure at least bound once the sum reaches bound: every term is a
// square, so the partial sums never decrease (nor do they when rounded),
// and a point whose sum reaches the best cost so far cannot beat it. col
// is the context's column of busy x threads, o its occupancy in the sums
// of obs and c the ridge's term at v. (A function of its own: inside
// fitOccupancy the loop kept its counter on the stack.)
func occCost(col []float64, obs []occObs, c, v, o, bound float64) float64 {
	dv, dv2 := v-o, v*v-o*o
	obs = obs[:len(col)] // so that the loop checks no index
	for t, w := range col {
		if c >= bound {
			return c
		}
		x := &obs[t]
		if w == 0 {
			c += x.e
			continue
		}
		a := x.s1 + w*dv
		b := x.s2 + w*dv2
		pred := 0.0
		if a > 0 {
			pred = x.sm * b / a
		}
		d := x.occ - pred
		c += d * d
	}
	return c
}

// setErr sets x's squared error from its sums.
func (x *occObs) setErr() {
	pred := 0.0
	if a := x.s1; a > 0 {
		pred = x.sm * x.s2 / a
	}
	d := x.occ - pred
	x.e = d * d
}

// appendKeys appends the keys of x to keys, none when x has the keys of
// prev, a sample whose keys keys holds already (a window's samples mostly
// share their contexts). uniqueKeys then sorts them and drops the
// repeats: one sort of all of them, where inserting each into a sorted
// list would cost the square of the window's contexts.
func appendKeys(keys []ctxKey, x, prev ctxVals) []ctxKey {
	if len(x) == len(prev) && slices.EqualFunc(x, prev, func(a, b ctxVal) bool { return a.key == b.key }) {
		return keys
	}
	for _, e := range x {
		keys = append(keys, e.key)
	}
	return keys
}

// uniqueKeys sorts keys and drops the repeats.
func uniqueKeys(keys []ctxKey) []ctxKey {
	slices.SortFunc(keys, cmpCtxKey)
	return slices.Compact(keys)
}

// keyAt returns the index of k in keys, searching from from: keys hold k
// at or after from (both are walked in ascending order).
func keyAt(keys []ctxKey, from int, k ctxKey) int {
	for cmpCtxKey(keys[from], k) != 0 {
		from++
	}
	return from
}

func cmpCtxKey(a, b ctxKey) int {
	if a.id != b.id {
		return cmp.Compare(a.id, b.id)
	}
	return cmp.Compare(a.threads, b.threads)
}

// boxSolve solves the positive definite system a x = b (a is m x m, row
// major) with each x in [0, 1]: an unknown whose solution falls outside is
// held at the bound it crossed and the rest solved again.
func boxSolve(a, b []float64, m int) []float64 {
	x := make([]float64, m)
	fixed := make([]bool, m)
	for range m + 1 {
		var free []int
		for p := range m {
			if !fixed[p] {
				free = append(free, p)
			}
		}
		n := len(free)
		if n == 0 {
			return x
		}
		// the free unknowns' system, the fixed ones moved to the right
		g := make([]float64, n*(n+1))
		for i, p := range free {
			r := b[p]
			for q := range m {
				if fixed[q] {
					r -= a[p*m+q] * x[q]
				}
			}
			for j, q := range free {
				g[i*(n+1)+j] = a[p*m+q]
			}
			g[i*(n+1)+n] = r
		}
		sol := gauss(g, n)
		out := false
		for i, p := range free {
			x[p] = sol[i]
			if sol[i] < 0 || sol[i] > 1 {
				x[p] = min(1, max(0, sol[i]))
				fixed[p], out = true, true
			}
		}
		if !out {
			return x
		}
	}
	return x
}

// gauss solves the n x n system in the augmented row-major matrix g (n
// rows of n+1) by elimination with partial pivoting; g is overwritten.
func gauss(g []float64, n int) []float64 {
	w := n + 1
	for c := range n {
		piv := c
		for r := c + 1; r < n; r++ {
			if math.Abs(g[r*w+c]) > math.Abs(g[piv*w+c]) {
				piv = r
			}
		}
		if piv != c {
			for k := range w {
				g[c*w+k], g[piv*w+k] = g[piv*w+k], g[c*w+k]
			}
		}
		if g[c*w+c] == 0 {
			continue
		}
		for r := c + 1; r < n; r++ {
			f := g[r*w+c] / g[c*w+c]
			for k := c; k < w; k++ {
				g[r*w+k] -= f * g[c*w+k]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		v := g[r*w+n]
		for k := r + 1; k < n; k++ {
			v -= g[r*w+k] * x[k]
		}
		if g[r*w+r] != 0 {
			x[r] = v / g[r*w+r]
		}
	}
	return x
}
