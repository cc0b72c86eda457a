package collector

import (
	"hash/maphash"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// seriesCache keeps, from one update of a collector to the next, the label
// pairs of each series the collector sent, by descriptor, value type and
// label values. A series sent again is sent as a sample of the cached
// series, which writes the same metric as a const metric of it would, with
// its new value: a publication then allocates no label pairs for the
// series it shares with the one before (most of them, as labels name
// GPUs, instances and tenants, and values are what moves). Series not
// sent in an update are dropped at its end. The first update caches
// nothing: an Exporter built for one request (a filtered scrape) pays
// nothing for a cache it would not use.
//
// An update holds the cache's lock from begin to end, so that the updates
// of concurrent collections of one collector take turns.
type seriesCache struct {
	mu     sync.Mutex
	seed   maphash.Seed
	series map[uint64]*series
	names  map[*prometheus.Desc]string // of the descriptors met; "" where not legacy
	gen    uint64                      // the update under way, or the last one
	live   int                         // the cached series sent in the update under way
}

// series is a cached series.
type series struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	values []string         // the label values it was sent with
	labels []*dto.LabelPair // the label pairs of its const metric
	text   []byte           // its name and labels in the text format (Text); nil where Text cannot render them
	gen    uint64           // the last update that sent it
}

// begin starts an update; end must follow, also when the update panics.
func (c *seriesCache) begin() {
	c.mu.Lock()
	if c.series == nil {
		c.seed = maphash.MakeSeed()
		c.series = map[uint64]*series{}
		c.names = map[*prometheus.Desc]string{}
	}
	c.gen++
	c.live = 0
}

// end drops the series the update did not send, and ends it.
func (c *seriesCache) end() {
	if c.live < len(c.series) {
		for h, s := range c.series {
			if s.gen != c.gen {
				delete(c.series, h)
			}
		}
	}
	c.mu.Unlock()
}

// hash is the key of a series in the cache.
func (c *seriesCache) hash(d *prometheus.Desc, t prometheus.ValueType, lv []string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	maphash.WriteComparable(&h, d)
	h.WriteByte(byte(t))
	for _, v := range lv {
		h.WriteString(v)
		h.WriteByte(0xff) // not in valid UTF-8, the only label values sent
	}
	return h.Sum64()
}

// get returns the cached series of d, t and lv, or nil, and the key to
// put it under.
func (c *seriesCache) get(d *prometheus.Desc, t prometheus.ValueType, lv []string) (*series, uint64) {
	if c.gen == 1 {
		return nil, 0
	}
	h := c.hash(d, t, lv)
	s := c.series[h]
	if s == nil || s.desc != d || s.typ != t || !slices.Equal(s.values, lv) {
		return nil, h
	}
	c.sent(s)
	return s, h
}

// put caches the series of const metric m, built from d, t and lv, under
// key h. A series already sent in this update under the same key (two
// series whose hashes collide) keeps it: the other is then built anew each
// time.
func (c *seriesCache) put(h uint64, d *prometheus.Desc, t prometheus.ValueType, lv []string, m prometheus.Metric) {
	if c.gen == 1 {
		return
	}
	if old := c.series[h]; old != nil && old.gen == c.gen {
		return
	}
	var out dto.Metric
	if m.Write(&out) != nil { // a const metric does not fail
		return
	}
	s := &series{desc: d, typ: t, values: slices.Clone(lv), labels: out.Label}
	if name := c.name(d); name != "" {
		s.text, _ = appendSeries(nil, name, out.Label, "", 0) // nil where a label name is not legacy
	}
	c.series[h] = s
	c.sent(s)
}

// name is the name of d where Text can render it, else "".
func (c *seriesCache) name(d *prometheus.Desc) string {
	n, ok := c.names[d]
	if !ok {
		m, err := metaOf(d)
		if err == nil {
			n = m.name
		}
		c.names[d] = n
	}
	return n
}

// sent marks s as sent in the update under way.
func (c *seriesCache) sent(s *series) {
	if s.gen != c.gen {
		s.gen = c.gen
		c.live++
	}
}

// sample is one value of a cached series: it writes what a const metric
// of the series with that value writes.
type sample struct {
	s *series
	v float64
}

// Desc implements prometheus.Metric.
func (m *sample) Desc() *prometheus.Desc { return m.s.desc }

// Write implements prometheus.Metric.
func (m *sample) Write(out *dto.Metric) error {
	out.Label = m.s.labels
	switch m.s.typ {
	case prometheus.CounterValue:
		out.Counter = &dto.Counter{Value: &m.v}
	case prometheus.GaugeValue:
		out.Gauge = &dto.Gauge{Value: &m.v}
	default:
		out.Untyped = &dto.Untyped{Value: &m.v}
	}
	return nil
}

// sampleChunk is how many samples an emitter allocates at once.
const sampleChunk = 256
