package main

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// maxCachedFormats bounds the encodings kept per snapshot (a format is a
// content type with its escaping scheme, times gzip or not). Requests for
// further ones are rendered on demand.
const maxCachedFormats = 8

// exposition serves the collectors' metrics encoded once per snapshot and
// the exporter's own metrics (Go, process, promhttp), which change on every
// request, gathered live. The two parts are concatenated: metric families
// never repeat between them, and the order of families does not matter in
// any exposition format. For gzip, the cached part is kept as a deflate
// stream ending on a sync flush, so that a response is a gzip header, that
// stream, the live part compressed after it, and a trailer whose CRC is
// carried on from the cached part's.
type exposition struct {
	collectors prometheus.Gatherer
	self       prometheus.Gatherer // nil without the exporter's own metrics
	// version returns a comparable value that changes whenever what the
	// collectors would render changes (the snapshot); nil renders the
	// collectors on every request.
	version     func() any
	openMetrics bool
	logger      log.Logger

	mu      sync.Mutex
	key     any
	entries map[renderKey]*rendered
	// wanted are the encodings requested so far; publish renders them
	// ahead of the first request for a new snapshot.
	wanted map[renderKey]bool
}

type renderKey struct {
	format expfmt.Format
	gzip   bool
}

// rendered is the collectors' part of a response in one encoding.
type rendered struct {
	done chan struct{} // closed once the fields are set
	body []byte        // the encoded families; a sync-flushed deflate stream when gzip
	crc  uint32        // CRC-32 of the uncompressed bytes
	size int           // length of the uncompressed bytes
}

func newExposition(collectors, self prometheus.Gatherer, version func() any, openMetrics bool, logger log.Logger) *exposition {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return &exposition{
		collectors: collectors, self: self, version: version, openMetrics: openMetrics, logger: logger,
		entries: map[renderKey]*rendered{}, wanted: map[renderKey]bool{},
	}
}

// ServeHTTP implements http.Handler.
func (e *exposition) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	formats := expfmt.DefaultAcceptedFormats()
	if e.openMetrics {
		formats = expfmt.DefaultOpenMetricsAcceptedFormats()
	}
	k := renderKey{format: expfmt.NegotiateAccept(r.Header, formats...), gzip: acceptsGzip(r.Header)}
	cached := e.entry(k)

	live := getBuffer()
	defer putBuffer(live)
	if e.self != nil {
		encodeFamilies(live, e.self, k.format, e.logger)
	}
	if k.format.FormatType() == expfmt.TypeOpenMetrics {
		live.WriteString("# EOF\n")
	}

	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Type", string(k.format))
	if !k.gzip {
		h.Set("Content-Length", strconv.Itoa(len(cached.body)+live.Len()))
		w.Write(cached.body)
		w.Write(live.Bytes())
		return
	}
	tail := getBuffer()
	defer putBuffer(tail)
	deflateTo(tail, live.Bytes(), flate.HuffmanOnly, true)
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], crc32.Update(cached.crc, crc32.IEEETable, live.Bytes()))
	binary.LittleEndian.PutUint32(trailer[4:], uint32(cached.size+live.Len()))
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.Itoa(len(gzipHeader)+len(cached.body)+tail.Len()+len(trailer)))
	w.Write(gzipHeader)
	w.Write(cached.body)
	w.Write(tail.Bytes())
	w.Write(trailer[:])
}

// entry returns the collectors' part in encoding k for the current
// version, rendering it if no request has yet. Concurrent requests for a
// new version wait for one rendering.
func (e *exposition) entry(k renderKey) *rendered {
	if e.version == nil {
		return e.render(k)
	}
	v := e.version()
	e.mu.Lock()
	if v != e.key {
		e.key = v
		clear(e.entries)
	}
	r, ok := e.entries[k]
	if ok {
		e.mu.Unlock()
		<-r.done
		return r
	}
	if len(e.entries) >= maxCachedFormats {
		e.mu.Unlock()
		return e.render(k)
	}
	if len(e.wanted) < maxCachedFormats {
		e.wanted[k] = true
	}
	r = &rendered{done: make(chan struct{})}
	e.entries[k] = r
	e.mu.Unlock()
	e.fill(r, k)
	close(r.done)
	return r
}

// publish renders every encoding requested so far for the current
// version, so that the first scrape of a new snapshot finds it encoded.
// The sampler calls it after each snapshot is stored.
func (e *exposition) publish() {
	e.mu.Lock()
	keys := make([]renderKey, 0, len(e.wanted))
	for k := range e.wanted {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	for _, k := range keys {
		e.entry(k)
	}
}

func (e *exposition) render(k renderKey) *rendered {
	r := &rendered{}
	e.fill(r, k)
	return r
}

func (e *exposition) fill(r *rendered, k renderKey) {
	var buf bytes.Buffer
	encodeFamilies(&buf, e.collectors, k.format, e.logger)
	r.size, r.crc = buf.Len(), crc32.ChecksumIEEE(buf.Bytes())
	if k.gzip {
		var out bytes.Buffer
		deflateTo(&out, buf.Bytes(), flate.DefaultCompression, false)
		r.body = out.Bytes()
	} else {
		r.body = buf.Bytes()
	}
}

// encodeFamilies gathers g and encodes its families to buf in format,
// without the OpenMetrics end marker. As promhttp's ContinueOnError does,
// a gathering or encoding error is logged and what could be encoded is
// served.
func encodeFamilies(buf *bytes.Buffer, g prometheus.Gatherer, format expfmt.Format, logger log.Logger) {
	mfs, err := g.Gather()
	if err != nil {
		level.Error(logger).Log("msg", "error gathering metrics", "err", err)
	}
	enc := expfmt.NewEncoder(buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			level.Error(logger).Log("msg", "error encoding metric family", "family", mf.GetName(), "err", err)
		}
	}
}

// gzipHeader is a gzip member header: deflate, no flags, no time, unknown
// OS.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// flaters hold deflate compressors for reuse, by level: each allocates
// several hundred KiB. The collectors' part, deflated once per snapshot,
// takes the default level. The live part of each response (some 8 KiB of
// Go and process metrics) is Huffman-coded only: about 5 KiB instead of 2
// at the default level, but without the match search, whose hash tables
// (of 128 KiB and more, cold by the next scrape) made it the largest
// single cost of a cached scrape.
var flaters = map[int]*sync.Pool{flate.DefaultCompression: newFlaterPool(flate.DefaultCompression), flate.HuffmanOnly: newFlaterPool(flate.HuffmanOnly)}

func newFlaterPool(level int) *sync.Pool {
	return &sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, level) // the levels above are valid
		return w
	}}
}

// deflateTo compresses p at level (one of flaters') into a raw deflate
// stream appended to out. With final the stream ends with the final block;
// without, it ends on a sync flush, byte aligned, so that another stream
// may follow it in the same member.
func deflateTo(out *bytes.Buffer, p []byte, level int, final bool) {
	pool := flaters[level]
	fw := pool.Get().(*flate.Writer)
	defer pool.Put(fw)
	fw.Reset(out)
	fw.Write(p) // a bytes.Buffer does not fail
	if final {
		fw.Close()
	} else {
		fw.Flush()
	}
}

// maxPooledBuffer is the largest buffer put back for reuse: the live part
// of a response is some KiB; a buffer grown far beyond by an unusual
// request is left to the collector.
const maxPooledBuffer = 1 << 20

// buffers holds the buffers a response's live part is encoded and
// compressed into, so that a scrape allocates none in the steady state.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer {
	b := buffers.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuffer {
		buffers.Put(b)
	}
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(h http.Header) bool {
	for _, v := range h.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			if qv, ok := strings.CutPrefix(q, "q="); ok {
				if f, err := strconv.ParseFloat(qv, 64); err == nil && f == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}
