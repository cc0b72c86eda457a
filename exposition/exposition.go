// Package exposition serves a ready-rendered /metrics body per snapshot:
// the collectors' metrics are encoded once for each snapshot and format,
// and every scrape of that snapshot is served those bytes, followed by the
// exporter's own metrics (Go, process, promhttp) gathered live.
//
// A scrape never waits on a render once its format has been rendered
// once (and asked for during the last idlePublications publications):
// while the encoding of a new snapshot is under way, requests are
// served the previous rendering (at most one sample old). Each format
// holds at most two renderings, the one served and the one under way, the
// memory of a retired one for the next to encode into, plus what requests
// in flight still hold. A rendering into a format's slot (the first one,
// which its request waits for, as well as those in the background) yields
// the processor as it goes, so that scrapes are not kept waiting for one.
package exposition

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
)

// maxCachedFormats bounds the encodings kept (a format is a content type
// with its escaping scheme, times gzip or not). Requests for further ones
// are rendered on demand.
const maxCachedFormats = 8

// idlePublications is how many publications an encoding is kept and
// rendered at each without a request for it (10 minutes at the default
// sample interval of 1s): past it, it is dropped with its memory, and a
// request for it renders it anew (and waits, as the first one did), so
// that a format asked for once is not rendered for ever.
const idlePublications = 600

// Options configure a Cache.
type Options struct {
	// Collectors are the metrics rendered once per version.
	Collectors prometheus.Gatherer
	// Text, when set, renders what Collectors gathers straight in the
	// text format (version 0.0.4), byte for byte what encoding the
	// gathered families gives, calling yield (when not nil) between
	// families. Its error is logged as a gathering error (what it wrote
	// is served), except one wrapping errors.ErrUnsupported, returned
	// having written nothing, after which Collectors is gathered and
	// encoded instead.
	Text func(buf *bytes.Buffer, yield func()) error
	// Self are the exporter's own metrics, gathered on every request; nil
	// for none.
	Self prometheus.Gatherer
	// SelfText is Text for Self.
	SelfText func(buf *bytes.Buffer, yield func()) error
	// Version returns a comparable value that changes whenever what
	// Collectors would render changes (the snapshot); nil renders
	// Collectors on every request. It is called with the Cache's lock
	// held, so it must be cheap and must not call the Cache.
	Version func() any
	// OpenMetrics offers OpenMetrics in content negotiation.
	OpenMetrics bool
	Logger      log.Logger
	// Now is the network's clock, the write deadlines' (nil: the wall
	// clock).
	Now func() time.Time
}

// Cache is the HTTP handler of the metrics endpoint. The two parts of a
// response are concatenated: metric families never repeat between them,
// and the order of families does not matter in any exposition format.
// For gzip, the cached part is kept as a deflate stream ending on a sync
// flush, so that a response is a gzip header, that stream, the live part
// compressed after it, and a trailer whose CRC is carried on from the
// cached part's.
type Cache struct {
	o Options

	mu sync.Mutex
	// slots are the encodings requested during the last idlePublications
	// publications, at most maxCachedFormats.
	slots map[key]*slot
	pubs  uint64 // publications so far

	cut *httplimit.WriteLog
	// outside bounds the bodies written outside their request's slot
	// that are no longer this cache's alone to hold: one rendered for a
	// request (an encoding past maxCachedFormats, or without Version),
	// and a cached one retired while requests still write it. Metrics
	// shares it with the filtered responses.
	outside *httplimit.Budget
}

type key struct {
	format expfmt.Format
	gzip   bool
}

// slot is one encoding's renderings. Besides the one served and the one
// under way, it keeps the memory of a retired rendering that no request
// holds any more (spare), and for gzip the uncompressed text of the last
// rendering (scratch): the next rendering encodes into them, so that a
// publication allocates no new body in the steady state and the garbage
// collector runs less often beside the scrapes. The fields are guarded by
// Cache.mu; one rendering at most is under way per slot, and it takes
// spare and scratch for its duration.
type slot struct {
	cur     *rendered // the newest finished rendering; nil until the first
	next    *pending  // the rendering under way; nil when none
	spare   []byte
	scratch []byte
	used    uint64 // Cache.pubs at the latest request for it
}

// rendered is the collectors' part of a response in one encoding.
type rendered struct {
	version any    // what Version returned when it was started
	body    []byte // the encoded families; a sync-flushed deflate stream when gzip
	crc     uint32 // CRC-32 of the uncompressed bytes
	size    int    // length of the uncompressed bytes
	// users counts the requests writing body, and retired is set once a
	// newer rendering is served instead (both under Cache.mu): body goes
	// back to its slot when both say that nothing can read it any more.
	users   int
	retired bool
	// held is what body counts against Cache.outside, from its
	// retirement while requests still write it until the last one is
	// done.
	held int
}

// pending is a rendering under way.
type pending struct {
	version any
	done    chan struct{} // closed once r is set
	r       *rendered
}

// New returns a Cache over o.
func New(o Options) *Cache {
	if o.Logger == nil {
		o.Logger = log.NewNopLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cache{o: o, slots: map[key]*slot{}, cut: newWriteLog(o.Logger),
		outside: httplimit.NewBudget(maxOutsideBytes)}
}

// ServeHTTP implements http.Handler.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	formats := expfmt.DefaultAcceptedFormats()
	if c.o.OpenMetrics {
		formats = expfmt.DefaultOpenMetricsAcceptedFormats()
	}
	k := key{format: expfmt.NegotiateAccept(r.Header, formats...), gzip: acceptsGzip(r.Header)}
	cached, s := c.latest(k)
	if s != nil {
		defer c.release(s, cached)
	}

	live := getBuffer()
	defer putBuffer(live)
	if c.o.Self != nil {
		encode(live, c.o.SelfText, c.o.Self, k.format, c.o.Logger, false)
	}
	if k.format.FormatType() == expfmt.TypeOpenMetrics {
		live.WriteString("# EOF\n")
	}

	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Type", string(k.format))
	// Rendered: written outside the request's slot, bounded by stalls,
	// and by c.outside: a body rendered for this request alone where it
	// fits, a cached one (shared) unless retired ones still written
	// fill it.
	sw := httplimit.NewStallWriter(w, c.o.Now, httplimit.StallTimeout, maxTransfer)
	write := httplimit.WriteShared
	if s == nil {
		write = httplimit.WriteOutside
	}
	if !k.gzip {
		total := len(cached.body) + live.Len()
		h.Set("Content-Length", strconv.Itoa(total))
		if err := write(r, sw, c.outside, cached.body, live.Bytes()); err != nil {
			c.cut.Failed(c.o.Now(), r, sw, err, "total_bytes", total)
		}
		return
	}
	tail := getBuffer()
	defer putBuffer(tail)
	deflateTo(tail, live.Bytes(), flate.HuffmanOnly, true, false)
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], crc32.Update(cached.crc, crc32.IEEETable, live.Bytes()))
	binary.LittleEndian.PutUint32(trailer[4:], uint32(cached.size+live.Len()))
	total := len(gzipHeader) + len(cached.body) + tail.Len() + len(trailer)
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.Itoa(total))
	if err := write(r, sw, c.outside, gzipHeader, cached.body, tail.Bytes(), trailer[:]); err != nil {
		c.cut.Failed(c.o.Now(), r, sw, err, "total_bytes", total)
	}
}

// latest returns the newest rendering of the collectors' part in encoding
// k, and the slot it is held from (nil for one rendered for this request
// alone); the caller releases a held one once written. When it is of an
// older version than the current one, it is served all the same and the
// current version is rendered in the background, unless a rendering is
// under way already. Only the first request for an encoding waits, for
// the one rendering of it that concurrent requests share.
func (c *Cache) latest(k key) (*rendered, *slot) {
	if c.o.Version == nil {
		return c.render(k, nil, nil), nil
	}
	c.mu.Lock()
	// Read under mu, so that renderings start in version order and the
	// served one never goes back to an older version.
	v := c.o.Version()
	s := c.slots[k]
	if s == nil {
		if len(c.slots) >= maxCachedFormats {
			c.mu.Unlock()
			return c.render(k, v, nil), nil
		}
		s = &slot{}
		c.slots[k] = s
	}
	s.used = c.pubs
	if cur := s.cur; cur != nil {
		if cur.version != v && s.next == nil {
			go c.finish(k, s, c.start(s, v))
		}
		cur.users++
		c.mu.Unlock()
		return cur, s
	}
	p := s.next
	if p == nil {
		p = c.start(s, v)
		c.mu.Unlock()
		c.finish(k, s, p)
	} else {
		c.mu.Unlock()
		<-p.done
	}
	// The rendering waited for, or a newer one finished since.
	c.mu.Lock()
	defer c.mu.Unlock()
	s.cur.users++
	return s.cur, s
}

// release ends a request's use of r, held from s.
func (c *Cache) release(s *slot, r *rendered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.users--
	c.recycle(s, r)
}

// recycle gives r's memory back to s once r is retired and no request
// holds it, and what it counted against c.outside back to that; c.mu is
// held.
func (c *Cache) recycle(s *slot, r *rendered) {
	if !r.retired || r.users > 0 || r.body == nil {
		return
	}
	c.outside.Give(r.held)
	r.held = 0
	if cap(r.body) > cap(s.spare) {
		s.spare = r.body[:0]
	}
	r.body = nil
}

// Publish renders every encoding requested during the last
// idlePublications publications at the current version, so that scrapes
// move to a new snapshot as soon as it is encoded; it returns once they
// have (a rendering already under way is waited for), and drops the
// others. The sampler calls it after each snapshot is stored.
func (c *Cache) Publish() {
	if c.o.Version == nil {
		return
	}
	c.mu.Lock()
	c.pubs++
	maps.DeleteFunc(c.slots, func(_ key, s *slot) bool { return c.pubs-s.used > idlePublications })
	keys := slices.Collect(maps.Keys(c.slots))
	c.mu.Unlock()
	for _, k := range keys {
		c.refresh(k)
	}
}

// refresh brings encoding k to the current version, after the rendering
// under way, if any, has finished.
func (c *Cache) refresh(k key) {
	for range 2 {
		c.mu.Lock()
		v := c.o.Version()
		s := c.slots[k]
		if s == nil || s.cur != nil && s.cur.version == v {
			c.mu.Unlock()
			return
		}
		if p := s.next; p != nil {
			c.mu.Unlock()
			<-p.done
			continue
		}
		p := c.start(s, v)
		c.mu.Unlock()
		c.finish(k, s, p)
		return
	}
}

// start records a rendering of version v under way in s; c.mu is held.
func (c *Cache) start(s *slot, v any) *pending {
	p := &pending{version: v, done: make(chan struct{})}
	s.next = p
	return p
}

// finish renders p and makes it the one s serves.
func (c *Cache) finish(k key, s *slot, p *pending) {
	p.r = c.render(k, p.version, s)
	c.mu.Lock()
	if old := s.cur; old != nil {
		old.retired = true
		if old.users > 0 {
			// Requests still write it, outside their slot for all the
			// cache knows: no longer the one body that all share, it
			// counts against c.outside until they are done.
			old.held = cap(old.body)
			c.outside.Hold(old.held)
		}
		c.recycle(s, old)
	}
	s.cur, s.next = p.r, nil
	c.mu.Unlock()
	close(p.done)
}

// render encodes the collectors' part in encoding k, for slot s (nil
// when rendered for one request): into s's spare memory, yielding the
// processor between families and between chunks of the compression
// whenever s is a slot (the first rendering of a format as well as those
// in the background), so that it holds no processor for long from the
// scrapes being served.
func (c *Cache) render(k key, v any, s *slot) *rendered {
	var spare, scratch []byte
	if s != nil {
		c.mu.Lock()
		spare, scratch, s.spare, s.scratch = s.spare, s.scratch, nil, nil
		c.mu.Unlock()
	}
	text := bytes.NewBuffer(spare)
	if k.gzip {
		text = bytes.NewBuffer(scratch)
	}
	encode(text, c.o.Text, c.o.Collectors, k.format, c.o.Logger, s != nil)
	r := &rendered{version: v, size: text.Len(), crc: crc32.ChecksumIEEE(text.Bytes())}
	if !k.gzip {
		r.body = text.Bytes()
		return r
	}
	out := bytes.NewBuffer(spare)
	deflateTo(out, text.Bytes(), flate.DefaultCompression, false, s != nil)
	r.body = out.Bytes()
	if s != nil {
		c.mu.Lock()
		s.scratch = text.Bytes()[:0]
		c.mu.Unlock()
	}
	return r
}
