package latency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// acceptHeader asks for delimited protobuf first, then the text format.
const acceptHeader = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1`

const userAgent = "vgpu_exporter"

// FamilySource is a gpu.AppMetricsSource that also hands over an
// application's metrics already decoded, as the text parser would read
// them from AppMetrics, so that a sim:// source in the same process is
// neither written nor parsed as text (the simulator does this; max_bytes
// does not apply).
type FamilySource interface {
	AppMetricFamilies(app string) (map[string]*dto.MetricFamily, error)
}

// scraper fetches latency sources.
type scraper struct {
	httpc *http.Client
	app   gpu.AppMetricsSource
}

// fetch reads the source's exposition, bounded by its timeout and size.
func (sc *scraper) fetch(ctx context.Context, src *Source) (map[string]*dto.MetricFamily, error) {
	if app := SimApp(src.URL); app != "" {
		if sc.app == nil {
			return nil, fmt.Errorf("%s: no simulator backend to read sim:// sources from", src.URL)
		}
		if fs, ok := sc.app.(FamilySource); ok {
			fams, err := fs.AppMetricFamilies(app)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src.URL, err)
			}
			return fams, nil
		}
		w := &limitWriter{max: src.MaxBytes}
		if err := sc.app.AppMetrics(app, w); err != nil {
			return nil, fmt.Errorf("%s: %w", src.URL, err)
		}
		if w.over {
			return nil, fmt.Errorf("%s: exposition larger than max_bytes %d", src.URL, src.MaxBytes)
		}
		fams, err := parseExposition(w.buf.Bytes(), expfmt.FmtText)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.URL, err)
		}
		return fams, nil
	}
	cctx, cancel := context.WithTimeout(ctx, src.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.URL, err)
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(src.Timeout.Seconds(), 'f', -1, 64))
	httpc := sc.httpc
	if httpc == nil {
		httpc = http.DefaultClient
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s", src.URL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, src.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", src.URL, err)
	}
	if int64(len(data)) > src.MaxBytes {
		return nil, fmt.Errorf("%s: response larger than max_bytes %d", src.URL, src.MaxBytes)
	}
	fams, err := parseExposition(data, expfmt.ResponseFormat(resp.Header))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.URL, err)
	}
	return fams, nil
}

// scrapeOnce scrapes the tracker's source once and records the result.
func (sc *scraper) scrapeOnce(ctx context.Context, t *sloTracker, now time.Time) error {
	fams, err := sc.fetch(ctx, t.src)
	if err == nil {
		var h histo
		h, err = extract(t.src, fams)
		if err == nil {
			t.observe(now, h)
			return nil
		}
		err = fmt.Errorf("%s: %w", t.src.URL, err)
	}
	t.fail(now, err)
	return err
}

type limitWriter struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if int64(w.buf.Len()+len(p)) > w.max {
		w.over = true
		return 0, errors.New("exposition larger than max_bytes")
	}
	return w.buf.Write(p)
}
