package exposition

import (
	"bytes"
	"compress/flate"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// encodeFamilies gathers g and encodes its families to buf in format,
// without the OpenMetrics end marker. As promhttp's ContinueOnError does,
// a gathering or encoding error is logged and what could be encoded is
// served. With yield, it lets other goroutines run after each family.
func encodeFamilies(buf *bytes.Buffer, g prometheus.Gatherer, format expfmt.Format, logger log.Logger, yield bool) {
	mfs, err := g.Gather()
	if err != nil {
		level.Error(logger).Log("msg", "error gathering metrics", "err", err)
	}
	enc := expfmt.NewEncoder(buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			level.Error(logger).Log("msg", "error encoding metric family", "family", mf.GetName(), "err", err)
		}
		if yield {
			runtime.Gosched()
		}
	}
}

// encode writes what g gathers in format to buf, through text (when not
// nil) where format is the text format, else gathered and encoded (also
// where text answers unsupported). With yield, it lets other goroutines
// run after each family.
func encode(buf *bytes.Buffer, text func(*bytes.Buffer, func()) error, g prometheus.Gatherer, format expfmt.Format, logger log.Logger, yield bool) {
	if text != nil && format.FormatType() == expfmt.TypeTextPlain {
		var y func()
		if yield {
			y = runtime.Gosched
		}
		err := text(buf, y)
		if !errors.Is(err, errors.ErrUnsupported) {
			if err != nil {
				level.Error(logger).Log("msg", "error gathering metrics", "err", err)
			}
			return
		}
	}
	encodeFamilies(buf, g, format, logger, yield)
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

// yieldChunk is how much deflateTo compresses between yields: some
// hundreds of microseconds of work at the default level.
const yieldChunk = 32 << 10

// deflateTo compresses p at level (one of flaters') into a raw deflate
// stream appended to out. With final the stream ends with the final block;
// without, it ends on a sync flush, byte aligned, so that another stream
// may follow it in the same member. With yield, it lets other goroutines
// run after each yieldChunk bytes.
func deflateTo(out *bytes.Buffer, p []byte, level int, final, yield bool) {
	pool := flaters[level]
	fw := pool.Get().(*flate.Writer)
	defer pool.Put(fw)
	fw.Reset(out)
	for yield && len(p) > yieldChunk {
		fw.Write(p[:yieldChunk]) // a bytes.Buffer does not fail
		p = p[yieldChunk:]
		runtime.Gosched()
	}
	fw.Write(p)
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
