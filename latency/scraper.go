package latency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/version"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
)

// acceptHeader asks for delimited protobuf first, then the text format.
const acceptHeader = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1`

// userAgent names the exporter and, when the build set it, its version.
func userAgent() string {
	if version.Version == "" {
		return "vgpu_exporter"
	}
	return "vgpu_exporter/" + version.Version
}

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
	// clock tells when an answer came, from which a Retry-After wait
	// runs; nil: when the scrape began.
	clock gpu.Clock
}

// answeredAt is when an answer to a scrape that began at start came.
func (sc *scraper) answeredAt(start time.Time) time.Time {
	if sc.clock == nil {
		return start
	}
	return sc.clock.Now()
}

// fetch reads the source's exposition, bounded by its timeout and size.
// Its errors name the source by urlmask.DisplayURL, never by the URL as configured.
func (sc *scraper) fetch(ctx context.Context, src *Source) (map[string]*dto.MetricFamily, error) {
	name := urlmask.DisplayURL(src.URL)
	if app := SimApp(src.URL); app != "" {
		if sc.app == nil {
			return nil, fmt.Errorf("%s: no simulator backend to read sim:// sources from", name)
		}
		if fs, ok := sc.app.(FamilySource); ok {
			fams, err := fs.AppMetricFamilies(app)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			return fams, nil
		}
		w := &limitWriter{max: src.MaxBytes}
		if err := sc.app.AppMetrics(app, w); err != nil {
			return nil, fmt.Errorf("%s: %s", name, clip.Text(err.Error(), maxErrLen))
		}
		if w.over {
			return nil, fmt.Errorf("%s: exposition larger than max_bytes %d", name, src.MaxBytes)
		}
		fams, err := decodeExposition(bytes.NewReader(w.buf.Bytes()), int64(w.buf.Len()), expfmt.NewFormat(expfmt.TypeTextPlain), families(src), src.Matchers)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return fams, nil
	}
	cctx, cancel := context.WithTimeout(ctx, src.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", name, urlmask.URLParseReason(src.URL, err))
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("User-Agent", userAgent())
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(src.Timeout.Seconds(), 'f', -1, 64))
	httpc := http.Client{}
	if sc.httpc != nil {
		httpc = *sc.httpc
	}
	httpc.CheckRedirect = checkRedirect(src.FollowRedirects)
	resp, err := httpc.Do(req)
	if err != nil {
		// The client's error names the URL it last asked for, which a
		// redirect's Location chose: name the configured one instead.
		return nil, fmt.Errorf("%s: %s", name, clip.Text(urlmask.Unwrap(err).Error(), maxErrLen))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, newStatusError(name, resp)
	}
	// The body (after any gzip decoding the transport does) is decoded as
	// it is read, up to max_bytes and one byte more, never further.
	body := &stickyReader{r: fileread.Limit(resp.Body, src.MaxBytes, "response")}
	fams, err := decodeExposition(body, src.MaxBytes, expfmt.ResponseFormat(resp.Header), families(src), src.Matchers)
	switch {
	case errors.Is(body.err, fileread.ErrTooLarge):
		return nil, fmt.Errorf("%s: response larger than max_bytes %d; stopped reading there", name, src.MaxBytes)
	case body.err != nil:
		return nil, fmt.Errorf("%s: reading the response: %s", name, clip.Text(body.err.Error(), maxErrLen))
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return fams, nil
}

// stickyReader keeps the first error of r other than io.EOF, whatever a
// parser reading it makes of it.
type stickyReader struct {
	r   io.Reader
	err error
}

func (s *stickyReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && s.err == nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// Redirect policies (Source.FollowRedirects).
const (
	RedirectsSameHost = "same-host" // the default: same scheme, host and port only
	RedirectsAny      = "any"
	RedirectsNone     = "none"
)

// maxRedirects is how many redirects one scrape follows.
const maxRedirects = 5

// checkRedirect is an http.Client CheckRedirect for a redirect policy.
func checkRedirect(policy string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		switch policy {
		case RedirectsAny:
			return nil
		case RedirectsNone:
			return errors.New("the source redirects, and follow_redirects is none")
		}
		from, to := via[0].URL, req.URL
		if from.Scheme != to.Scheme || !strings.EqualFold(from.Hostname(), to.Hostname()) || effectivePort(from) != effectivePort(to) {
			return fmt.Errorf("refused a redirect to another host or port (%s); follow_redirects: any allows it", clip.Text(to.Scheme+"://"+to.Host, maxQuoted))
		}
		return nil
	}
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// CheckSim reads a sim:// source once from app and picks its histogram
// (Triton: its counters) out of what the application serves, as every
// scrape of it will. The error says why the source could never give a
// reading: an application the simulator does not run, a histogram it does
// not serve, matchers that no series meets. nil for another scheme.
func CheckSim(src *Source, app gpu.AppMetricsSource) error {
	if SimApp(src.URL) == "" {
		return nil
	}
	sc := scraper{app: app}
	fams, err := sc.fetch(context.Background(), src)
	if err != nil {
		return err
	}
	if _, err := extract(src, fams); err != nil {
		return fmt.Errorf("%s: %w", urlmask.DisplayURL(src.URL), err)
	}
	return nil
}

// scrapeOnce scrapes the tracker's source once and records the result: a
// 429 or 503 with a Retry-After also when the source may be scraped again
// (the wait running from when the answer came: a slow source's is not cut
// short by the time the answer took).
func (sc *scraper) scrapeOnce(ctx context.Context, t *sloTracker, now time.Time) error {
	fams, err := sc.fetch(ctx, t.src)
	if err != nil {
		until, err := backoff(err, sc.answeredAt(now))
		t.failUntil(now, err, until)
		return err
	}
	h, err := extract(t.src, fams)
	if err == nil {
		err = t.observe(now, h)
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%s: %w", urlmask.DisplayURL(t.src.URL), err)
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
