package sim

import (
	"math"
	"math/rand/v2"
)

// The service-time noise: each job's lognormal multiplier (mean 1) comes
// from one standard normal draw of its tenant's noise stream, worked out at
// the spread the job's allocation asks for.

// noiseSpreads is how many spreads' multipliers a job keeps.
const noiseSpreads = 4

// noise is the job's lognormal service-time multiplier at spread sigma
// (mean 1): the job's standard normal draw is fixed, so the multiplier
// changes only with sigma. The multipliers of the last noiseSpreads
// spreads are kept: an MPS client's spread goes back and forth among a few
// values as neighbours (an LLM between its host and GPU phases) leave and
// rejoin.
func (j *job) noise(sigma float64) float64 {
	for i, s := range j.sigma[:j.spreads] {
		if s == sigma {
			return j.mult[i]
		}
	}
	return j.newNoise(sigma)
}

// newNoise is job.noise for a spread the job keeps no multiplier of. (A
// new job keeps none: counting them saves marking every slot empty at
// each job's start, and looking through empty ones.)
func (j *job) newNoise(sigma float64) float64 {
	i := j.evict
	if j.evict = i + 1; j.evict == noiseSpreads {
		j.evict = 0
	}
	if j.spreads < noiseSpreads {
		j.spreads++
	}
	j.sigma[i] = sigma
	j.mult[i] = math.Exp(sigma*j.z - sigma*sigma/2)
	return j.mult[i]
}

// noiseBlock is how many service-time noise draws a tenant makes at once.
const noiseBlock = 64

// noiseDraws are a tenant's next service-time noise draws, made in blocks:
// the standard normal draws come from the tenant's noise stream in the
// same order as one at a time, and their multipliers at the workload's
// spread are worked out back to back, where the exponentials overlap,
// instead of one on each job's critical path.
type noiseDraws struct {
	z, mult [noiseBlock]float64
	sigma   float64 // the spread of mult (NaN: mult not worked out)
	left    int     // draws not used yet, the last ones of the block
}

// next returns the next draw and its multiplier at spread sigma, as
// job.noise has them.
func (nd *noiseDraws) next(r *rand.Rand, sigma float64) (z, mult float64) {
	if nd.left == 0 {
		nd.draw(r)
		for i, z := range nd.z {
			nd.mult[i] = math.Exp(sigma*z - sigma*sigma/2)
		}
		nd.sigma = sigma
	}
	i := noiseBlock - nd.left
	nd.left--
	if sigma != nd.sigma {
		return nd.z[i], math.Exp(sigma*nd.z[i] - sigma*sigma/2)
	}
	return nd.z[i], nd.mult[i]
}

// nextZ returns the next draw alone, as next does.
func (nd *noiseDraws) nextZ(r *rand.Rand) float64 {
	if nd.left == 0 {
		nd.draw(r)
		nd.sigma = math.NaN()
	}
	i := noiseBlock - nd.left
	nd.left--
	return nd.z[i]
}

// draw makes the next block of draws.
func (nd *noiseDraws) draw(r *rand.Rand) {
	for i := range nd.z {
		nd.z[i] = r.NormFloat64()
	}
	nd.left = noiseBlock
}
