package tenant

import (
	"cmp"
	"slices"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/energyguard"
)

// IdleEnergy says where the energy of a GPU that no tenant's activity
// accounts for goes (docs/metering.md).
type IdleEnergy string

// Idle energy rules.
const (
	// IdleToIdle keeps it apart, in the GPU's idle energy.
	IdleToIdle IdleEnergy = "idle"
	// IdleByReservation splits it among the tenants on the GPU by what
	// they hold of it (their MIG instance's SMs, their MPS active-thread
	// caps, their vGPU profiles; an equal part of a time-sliced GPU); what
	// no tenant holds stays idle.
	IdleByReservation IdleEnergy = "reservation"
)

func (e IdleEnergy) valid() bool { return e == IdleToIdle || e == IdleByReservation }

// Meter is one tenant's cumulative metering on one GPU since the exporter
// started: counters that never decrease, kept while the tenant is away
// for BuilderOptions.DepartedRetention (then forgotten: back, it starts
// at 0).
// Every figure is apportioned from the GPU's own (see docs/tenants.md).
type Meter struct {
	GPU    int
	UUID   string
	Tenant string
	// EnergyJoules is the tenant's part of the GPU's energy counter's
	// increase; 0 on a GPU without an energy counter.
	EnergyJoules float64
	// GPUSecondsUsed is time weighted by the tenant's share of the GPU's
	// activity; GPUSecondsReserved time weighted by what it held of the GPU.
	GPUSecondsUsed     float64
	GPUSecondsReserved float64
	// UsedUnknown is true while no sample has metered time of the tenant's
	// with its activity known, and one has metered time without (a MIG
	// GPU without GPM or DCGM profiling figures), or, before any sample has
	// metered time (the exporter's first), the sample did not know it:
	// GPUSecondsUsed is then not known, not 0. EnergyUnknown is the same for EnergyJoules and its cost,
	// split by the activity (but where one tenant holds all of the GPU
	// under IdleByReservation). Time with the activity unknown adds nothing
	// to either.
	UsedUnknown, EnergyUnknown bool
	// ReservedUnknown is the same for GPUSecondsReserved and its cost: the
	// tenant's MIG instance's part of the GPU is not known (its SMs, or
	// the GPU's, unread), and its time is then held by no tenant.
	ReservedUnknown bool
	// MemoryByteSeconds is time weighted by the device memory it held.
	// MemoryUnknown is the same as UsedUnknown for it: time with the
	// tenant's memory unknown (Usage.MemoryUnknown) adds nothing.
	MemoryByteSeconds float64
	MemoryUnknown     bool
	// Costs are its GPU time held and its energy at the prices in force
	// at each sample, one per currency priced so far.
	Costs []Cost
}

// GPUMeter is what no tenant is charged for on one GPU since the exporter
// started. The tenants' Meters and the GPU's IdleEnergyJoules add up to the
// increase of the GPU's energy counter over the samples metered.
type GPUMeter struct {
	GPU              int
	UUID             string
	IdleEnergyJoules float64
	// EnergyJoules is the increase of the GPU's energy counter the meters
	// divided (the sum of every tenant's and the idle energy).
	EnergyJoules float64
	// EnergyKnown is true once the GPU reported an energy counter; without
	// one, the energy figures of its meters mean nothing.
	EnergyKnown bool
	// MemoryByteSeconds is the GPU's own used memory integrated over the
	// samples metered; what the tenants' MemoryByteSeconds leave of it is
	// memory no tenant's process holds.
	MemoryByteSeconds float64
	// UnsampledEnergyJoules is the part of IdleEnergyJoules the GPU
	// counted while no sample metered it (it was lost in the samples
	// between; samples that read it without its counter are owed their
	// part): no tenant's activity or reservation was known over that time.
	UnsampledEnergyJoules float64
	// UnattributedEnergyJoules is the part of IdleEnergyJoules of samples
	// whose split by activity is not known (activityKnown): what their
	// tenants' known activity leaves, not known to be idle.
	UnattributedEnergyJoules float64
	// IdleCosts are the GPU time no tenant held and the idle energy at the
	// prices in force: with the tenants' Costs they add up to the time
	// metered (the sum of the samples' intervals) and EnergyJoules at those
	// prices.
	IdleCosts []Cost
}

type meterKey struct{ uuid, tenant string }

// meterState accumulates the meters across samples (guarded by the
// Builder's buildMu).
type meterState struct {
	last    time.Time // time of the latest readings metered
	tenants map[meterKey]*Meter
	gpus    map[string]*GPUMeter

	// counters are the GPUs' energy counters as the meter read them, by
	// GPU UUID.
	counters map[string]*counterState
	// seen are the figures some time metered for a tenant on a GPU knew.
	seen map[meterKey]figures
	// owed are, by GPU UUID, the samples that metered a GPU read without
	// its energy counter since the counter's last reading: their share of
	// the counter's next increase is split by their weights.
	owed map[string]*owedEnergy
}

// counterState is what the meter keeps of a GPU's energy counter.
type counterState struct {
	read bool    // prev is a reading
	prev float64 // the reading the next increase counts from
	// at is when prev was read: the time the next increase spans, which
	// the sample's interval may not cover.
	at time.Time
	// draw is the most the GPU could draw (energyguard.Watts) at any
	// sample since prev was read, that one included: a limit lowered
	// since bounds none of the energy drawn before.
	draw energyguard.Draw
}

// figures is a set of a Meter's figures.
type figures uint8

const (
	figUsed figures = 1 << iota
	figEnergy
	figReserved
	figMemory
)

func newMeterState() meterState {
	return meterState{counters: map[string]*counterState{}, tenants: map[meterKey]*Meter{}, gpus: map[string]*GPUMeter{},
		seen: map[meterKey]figures{}, owed: map[string]*owedEnergy{}}
}

// note records what a sample of sec seconds knew of t's figures (known):
// a figure is unknown while no time metered knew it, and some did not.
// Before any time is metered (the exporter's first sample) a figure is
// as the sample knows it, so that a series unknown is not served 0 first,
// and one known is kept from then on, as if that sample had metered time.
func (m *meterState) note(t *Meter, sec float64, known figures) {
	k := meterKey{t.UUID, t.Tenant}
	if sec <= 0 {
		if _, metered := m.seen[k]; !metered {
			t.UsedUnknown = known&figUsed == 0
			t.EnergyUnknown = known&figEnergy == 0
			t.ReservedUnknown = known&figReserved == 0
			t.MemoryUnknown = known&figMemory == 0
			m.seen[k] = known
		}
		return
	}
	seen := m.seen[k] | known
	m.seen[k] = seen
	t.UsedUnknown = seen&figUsed == 0 && (t.UsedUnknown || known&figUsed == 0)
	t.EnergyUnknown = seen&figEnergy == 0 && (t.EnergyUnknown || known&figEnergy == 0)
	t.ReservedUnknown = seen&figReserved == 0 && (t.ReservedUnknown || known&figReserved == 0)
	t.MemoryUnknown = seen&figMemory == 0 && (t.MemoryUnknown || known&figMemory == 0)
}

// meter adds one sample: usage is the sample's attribution. A GPU's meters
// are its UUID's: r lists each GPU once (the sampler drops a device that
// repeats one listed before it). It returns the meters of every tenant and
// GPU seen so far, sorted by GPU and tenant.
func (m *meterState) meter(rule IdleEnergy, prices *Prices, r *gpu.Readings, usage []Usage) ([]Meter, []GPUMeter) {
	// Readings metered already (a rebuild of the same sample) add nothing.
	if r != nil && (m.last.IsZero() || r.Time.After(m.last)) {
		m.last = r.Time
		byGPU := map[string][]*Usage{}
		for i := range usage {
			byGPU[usage[i].UUID] = append(byGPU[usage[i].UUID], &usage[i])
		}
		for i := range r.Devices {
			if d := &r.Devices[i]; d.Up {
				m.device(rule, prices, d, r.Time, r.Interval.Seconds(), byGPU[d.UUID])
			}
		}
	}
	tenants := make([]Meter, 0, len(m.tenants))
	for _, t := range m.tenants {
		c := *t
		c.Costs = slices.Clone(t.Costs) // the state's own array changes with the next sample
		tenants = append(tenants, c)
	}
	slices.SortFunc(tenants, func(a, b Meter) int {
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Tenant, b.Tenant))
	})
	gpus := make([]GPUMeter, 0, len(m.gpus))
	for _, g := range m.gpus {
		c := *g
		c.IdleCosts = slices.Clone(g.IdleCosts)
		gpus = append(gpus, c)
	}
	slices.SortFunc(gpus, func(a, b GPUMeter) int { return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID)) })
	return tenants, gpus
}

// device meters one GPU read at at over an interval of sec seconds, its
// costs at prices (nil: none).
func (m *meterState) device(rule IdleEnergy, prices *Prices, d *gpu.Device, at time.Time, sec float64, usage []*Usage) {
	g := m.gpus[d.UUID]
	if g == nil {
		g = &GPUMeter{GPU: d.Index, UUID: d.UUID}
		m.gpus[d.UUID] = g
	}
	g.GPU = d.Index
	g.EnergyKnown = g.EnergyKnown || d.EnergyJoules != nil
	used, reserved := activityShares(d, usage), reservations(d, usage)
	known := activityKnown(d, usage)
	o := m.owed[d.UUID]
	c := m.counterOf(d.UUID)
	reading := c.take(d, at)
	energy, owed, unsampled := c.delta(reading, at, sec, o)
	var active, held float64
	for _, s := range used {
		active += s
	}
	for _, s := range reserved {
		held += s
	}
	// Shares scaled down to add up to 1 may add up to a little more in
	// floating point: the rest is at least 0, so that no counter decreases.
	active, held = min(1, active), min(1, held)
	rest := max(0, energy*(1-active))
	g.EnergyJoules += energy + unsampled
	g.MemoryByteSeconds += sec * float64(d.MemoryUsedBytes)
	// Where the activity is not known, neither is what it leaves: the
	// rest is no tenant's, but for a tenant holding all of the GPU, whose
	// energy under reservation is all of it whatever its activity.
	whole := !known && rule == IdleByReservation && len(usage) == 1 && reserved[0] >= 1
	unattributed := !known && !whole
	// Under reservation the tenants take the rest by what they hold; the
	// idle part is what none holds.
	byReservation := rule == IdleByReservation && !unattributed
	idleShare := 1.0 // of the rest
	if byReservation {
		idleShare = 1 - held
	}
	// float64(): the product rounded, never fused with the add below into
	// one multiply-add (which arm64 and amd64 v3 may do): the same idle
	// energy on every platform.
	idle := float64(rest * idleShare)
	if unattributed {
		g.UnattributedEnergyJoules += rest
	}
	// The energy counted while no sample was taken is no tenant's: none was
	// metered GPU time for it, so neither rule hands it out.
	idle += unsampled
	g.IdleEnergyJoules += idle
	g.UnsampledEnergyJoules += unsampled
	g.IdleCosts = addCost(g.IdleCosts, prices, sec*max(0, 1-held), idle)
	if c.read && reading.e == nil && sec > 0 {
		// read without its counter: owed its part of the next increase
		if o == nil {
			o = &owedEnergy{}
			m.owed[d.UUID] = o
		}
		frac := max(0, 1-active) // of the sample's energy, what the activity leaves
		o.sec += sec
		p := o.at(prices)
		p.idle += float64(sec * frac * idleShare) // rounded, as idle above
		if unattributed {
			o.unattributed += sec * frac
		}
		for i, u := range usage {
			w := used[i]
			if byReservation {
				w += frac * reserved[i]
			}
			p.tenants[u.Tenant] += sec * w
		}
	}
	if owed > 0 {
		m.payOwed(d, g, o, owed)
	}
	if reading.e != nil {
		delete(m.owed, d.UUID)
	}
	for i, u := range usage {
		t := m.tenant(d, u.Tenant)
		e := energy * used[i]
		if byReservation {
			e += rest * reserved[i]
		}
		var knew figures
		if known || figureKnown(d, u) {
			knew |= figUsed
		}
		// Its own activity known, its energy is: its part of the activity,
		// with under reservation its part of the rest where that is known
		// (where not, the rest is unattributed idle under either rule).
		if knew&figUsed != 0 || whole {
			knew |= figEnergy
		}
		if !d.MIGEnabled || u.GPUInstance == "" || fractionKnown(d, u) {
			knew |= figReserved
		}
		if !u.MemoryUnknown {
			knew |= figMemory
		}
		m.note(t, sec, knew)
		t.EnergyJoules += e
		t.GPUSecondsUsed += sec * used[i]
		t.GPUSecondsReserved += sec * reserved[i]
		if !u.MemoryUnknown {
			t.MemoryByteSeconds += sec * float64(u.MemoryUsedBytes)
		}
		t.Costs = addCost(t.Costs, prices, sec*reserved[i], e)
	}
}

func (m *meterState) tenant(d *gpu.Device, name string) *Meter {
	k := meterKey{d.UUID, name}
	t := m.tenants[k]
	if t == nil {
		t = &Meter{UUID: d.UUID, Tenant: name}
		m.tenants[k] = t
	}
	t.GPU = d.Index
	return t
}

// forget drops the meters of k's tenant on k's GPU (departed): its part of
// what the GPU's samples are owed of the counter's next increase becomes
// the idle part, as payOwed would pay it with no meter to pay.
func (m *meterState) forget(k meterKey) {
	delete(m.tenants, k)
	delete(m.seen, k)
	if o := m.owed[k.uuid]; o != nil {
		for _, p := range o.parts {
			if w, ok := p.tenants[k.tenant]; ok {
				p.idle += w
				delete(p.tenants, k.tenant)
			}
		}
	}
}

// maxDrawWatts bounds what a GPU draws, for telling a driver reload from
// a copy of the energy counter read late: above the power limit of any
// GPU NVML meters (an H100 SXM's is 700 W, a B200's 1000 W, a GB200's
// 1200 W).
const maxDrawWatts = 2000

// Bounds on a change of a GPU's energy counter, for telling the counter
// from a glitch taken as it (a backend that took a repeated glitch for a
// new level, or whose first reading was one): more than the GPU can have
// drawn since the previous reading.
const (
	// jumpSlack is time added to the time between two readings: a copy of
	// the counter (dcgm-exporter's) may be its collect interval old (30 s
	// by default), and a sample reads it later than its time.
	jumpSlack = 5 * time.Minute
)

// energyReading is d's energy counter read at at as the meter takes it.
type energyReading struct {
	e *float64 // nil: the sample is one read without the counter
	// rebase: the counter is where the previous reading cannot have led
	// to; the increase is not known, the next is counted from e.
	rebase bool
}

// counterOf is the state of GPU uuid's energy counter.
func (m *meterState) counterOf(uuid string) *counterState {
	c := m.counters[uuid]
	if c == nil {
		c = &counterState{}
		m.counters[uuid] = c
	}
	return c
}

// take is d's energy counter read at at as the meter takes it: nil
// without one, and where it went back by more than a driver reload
// explains. A reload restarts the counter at 0, so that its new value is
// at most what the GPU drew since the previous reading, maxDrawWatts over
// the time between; a counter higher than that and below the previous
// reading is a copy read before it (dcgm-exporter's page, up to its
// collect interval old), no reading of the counter now: the sample is one
// read without it, and the previous reading stays the one the next
// increase is counted from. A counter that far from the previous reading
// (energyguard.Watts over the time between and jumpSlack), or ahead of it by more
// than that, follows from no reading: one of the two is a glitch (the
// first reading, or a glitch a backend took for the counter at a new
// level), and the difference is no energy the GPU drew; it meters nothing
// and the next increase is counted from it (rebase). A copy of the
// previous reading (gpu.Device.EnergyRepeated: dcgm-exporter's page
// between two collections) is no reading either: the increase that
// follows covers the samples since, and is owed to them, not to the one
// sample where the copy moves. The draw bounding a jump is the most the
// GPU could draw at any sample since the previous reading (c.draw): a
// power limit lowered since does not bound the energy drawn before it.
func (c *counterState) take(d *gpu.Device, at time.Time) energyReading {
	w := energyguard.Watts(d.PowerLimitW)
	r := c.judge(d, at, c.draw.See(w))
	if r.e != nil {
		c.draw.From(w) // the reading the next increase counts from
	}
	return r
}

// judge is take's judgement of d's counter, the GPU drawing at most
// watts since the previous reading.
func (c *counterState) judge(d *gpu.Device, at time.Time, watts float64) energyReading {
	e := d.EnergyJoules
	if e == nil {
		return energyReading{}
	}
	if !c.read {
		return energyReading{e: e}
	}
	prev := c.prev
	if d.EnergyRepeated && *e == prev {
		return energyReading{}
	}
	span := at.Sub(c.at)
	most := watts * (span + jumpSlack).Seconds()
	switch {
	case *e < prev && *e <= maxDrawWatts*span.Seconds():
		return energyReading{e: e} // a reload
	case *e < prev && prev-*e <= most:
		return energyReading{} // a copy read late
	case *e < prev, *e-prev > most:
		return energyReading{e: e, rebase: true}
	}
	return energyReading{e: e}
}

// delta is the increase of the GPU's energy counter since its previous
// reading, r (as take takes it) read at at: 0 on the first
// reading, without a counter and on a rebase; after a counter reset (a
// driver reload), the new value. Where that reading is older than the
// sample's interval of sec seconds, the increase is split by time, at the
// GPU's average power over it: metered is the interval's part, for the
// sample's shares; owed the part of the samples that read the GPU without
// its counter since (o, nil if none), for theirs; unsampled the rest, the
// time the GPU was not read (lost), which no sample's activity or
// reservation covers.
func (c *counterState) delta(r energyReading, at time.Time, sec float64, o *owedEnergy) (metered, owed, unsampled float64) {
	if r.e == nil {
		return 0, 0, 0
	}
	cur := *r.e
	ok, prev, prevAt := c.read, c.prev, c.at
	c.read, c.prev, c.at = true, cur, at
	switch {
	case !ok, r.rebase:
		return 0, 0, 0
	case cur < prev:
		metered = cur
	default:
		metered = cur - prev
	}
	if o != nil && o.sec > 0 {
		read := max(0, sec) + o.sec
		whole := metered
		if span := at.Sub(prevAt).Seconds(); span > read {
			whole = metered * read / span
			unsampled = metered - whole
		}
		metered = whole * max(0, sec) / read
		return metered, whole - metered, unsampled
	}
	// A sample whose own interval spans the time (a stalled sampler) has
	// activity figures over all of it, and is apportioned whole.
	if span := at.Sub(prevAt).Seconds(); span > sec {
		whole := metered
		metered = whole * max(0, sec) / span
		unsampled = whole - metered
	}
	return metered, 0, unsampled
}
