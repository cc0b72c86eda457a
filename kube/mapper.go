package kube

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/ratelog"
)

// Options configure a Mapper.
type Options struct {
	// PodResourcesSocket is the kubelet pod-resources socket (usually
	// /var/lib/kubelet/pod-resources/kubelet.sock).
	PodResourcesSocket string
	// PodMetadata is an optional source of pod metadata (UIDs, labels,
	// container IDs): a file path or an http(s) URL serving a PodList in
	// JSON, such as the kubelet's /pods endpoint, or KubeletPods. Needed
	// for `labels` selectors and to tell apart pods that share one GPU.
	// The request is made to a URL as given; errors, log lines and Status
	// name it by SourceName, its password and query values masked.
	PodMetadata string
	// KubeletAddress is the kubelet whose /pods a PodMetadata of
	// KubeletPods reads: see KubeletPodsURL.
	KubeletAddress string
	// Refresh is how often the mapping is refreshed; default 10s.
	Refresh time.Duration
	// Timeout bounds each call of a refresh (the pod-resources List, the
	// pod metadata read), body included; default 5s.
	Timeout time.Duration
	// BearerTokenFile holds the token sent as "Authorization: Bearer" to a
	// PodMetadata https URL (a service account token, as the kubelet's
	// /pods needs). It is read again on every request, so a rotated token
	// is used as soon as it is written.
	BearerTokenFile string
	// CAFile holds the PEM certificates that verify a PodMetadata https
	// URL's server (the kubelet's serving certificate); default: the
	// system roots.
	CAFile string
	// HTTPClient reads pod metadata URLs; nil means a default client (with
	// CAFile's roots when set). With CAFile, HTTPClient must be nil.
	HTTPClient *http.Client
	// Clock is the model time; nil means gpu.RealClock{}.
	Clock gpu.Clock
	// Logger receives refresh failures and recoveries; nil discards.
	Logger log.Logger
}

// Status is the state of the pod-resources mapping.
type Status struct {
	Up          bool      // the last pod-resources query succeeded
	LastSuccess time.Time // when the mapping in use was fetched
	ErrorsTotal uint64    // failed pod-resources queries
	PodsMapped  int
	// Metadata is the state of the pod metadata, when there is a source.
	Metadata MetadataStatus
}

// MetadataStatus is the state of the pod metadata. It is read after each
// successful pod-resources query; when that read fails, the fresh
// pod-resources answer is used with the last good metadata.
type MetadataStatus struct {
	Source      string    // the file or URL (by SourceName); "" when there is none
	Up          bool      // the last read succeeded
	LastSuccess time.Time // when the metadata in use was read
	ErrorsTotal uint64    // failed reads
}

// Mapper keeps the latest good pod-resources mapping: refreshed every
// Options.Refresh on its own goroutine after Start, or on Refresh in the
// caller's goroutine. Mapping and Status never wait on a refresh.
type Mapper struct {
	opts   Options
	logger log.Logger
	clock  gpu.Clock
	kube   *kubeClient

	mapping atomic.Pointer[Mapping]
	// meta is the last good pod metadata; nil before the first.
	meta    atomic.Pointer[podMetadata]
	mu      sync.Mutex // guards status and started
	status  Status
	started bool
	loops   sync.WaitGroup
	// clipLines bounds the lines naming pods of which the metadata's
	// bounds kept less than they have, by pod
	clipLines *ratelog.Keyed
}

// clipLogEvery is how often a pod whose labels or container statuses the
// pod metadata's bounds cut is logged at most; clipLogKeys, how many pods
// apart.
const (
	clipLogEvery = 10 * time.Minute
	clipLogKeys  = 16
)

// NewMapper returns a Mapper for the socket in opts. It reads only
// Options.CAFile, so that a bad one fails at start (the gRPC connection is
// made, and the token read, at the first refresh), and refuses a pod
// metadata URL that no request could be made to (CheckPodMetadataURL).
func NewMapper(opts Options) (*Mapper, error) {
	if opts.PodMetadata != "" && opts.PodResourcesSocket == "" {
		return nil, fmt.Errorf("pod metadata %s is read only with a kubelet pod-resources socket; set both or neither", SourceName(opts.PodMetadata))
	}
	if opts.PodResourcesSocket == "" {
		return nil, fmt.Errorf("no kubelet pod-resources socket to read the pod mapping from")
	}
	switch {
	case opts.PodMetadata == KubeletPods:
		u, err := KubeletPodsURL(opts.KubeletAddress)
		if err != nil {
			return nil, fmt.Errorf("pod metadata from the kubelet: %w", err)
		}
		opts.PodMetadata = u
	case opts.KubeletAddress != "":
		return nil, fmt.Errorf("kubelet address %q is used only for pod metadata from the kubelet, not %q", opts.KubeletAddress, SourceName(opts.PodMetadata))
	case strings.HasPrefix(opts.PodMetadata, "http://") || strings.HasPrefix(opts.PodMetadata, "https://"):
		if err := CheckPodMetadataURL(opts.PodMetadata); err != nil {
			return nil, err
		}
	}
	if (opts.BearerTokenFile != "" || opts.CAFile != "") && !strings.HasPrefix(opts.PodMetadata, "https://") {
		return nil, fmt.Errorf("a bearer token file or CA file is used only for a pod metadata https:// URL, not %q", SourceName(opts.PodMetadata))
	}
	if opts.CAFile != "" {
		if opts.HTTPClient != nil {
			return nil, fmt.Errorf("pod metadata CA file %s: give the CA or an HTTP client, not both", opts.CAFile)
		}
		c, err := clientWithCA(opts.CAFile)
		if err != nil {
			return nil, err
		}
		opts.HTTPClient = c
	}
	opts.Clock = cmp.Or[gpu.Clock](opts.Clock, gpu.RealClock{})
	opts.Logger = cmp.Or(opts.Logger, log.NewNopLogger())
	opts.HTTPClient = cmp.Or(opts.HTTPClient, &http.Client{})
	if opts.Refresh <= 0 {
		opts.Refresh = 10 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	k, err := newKubeClient(opts.PodResourcesSocket, opts.PodMetadata, opts.HTTPClient, opts.Refresh, opts.Timeout)
	if err != nil {
		return nil, err
	}
	k.tokenFile = opts.BearerTokenFile
	m := &Mapper{opts: opts, logger: opts.Logger, clock: opts.Clock, kube: k, clipLines: ratelog.NewKeyed(clipLogEvery, clipLogKeys)}
	m.status.Metadata.Source = SourceName(opts.PodMetadata)
	return m, nil
}

// Mapping returns the latest good mapping; nil before the first success.
func (m *Mapper) Mapping() *Mapping { return m.mapping.Load() }

// Status returns the state of the mapping.
func (m *Mapper) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// Start refreshes the mapping now and then every Options.Refresh, on the
// Mapper's clock, until ctx ends, and then closes the connection. Start
// returns at once; a second call does nothing.
func (m *Mapper) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return
	}
	m.started = true
	m.loops.Add(1)
	go func() {
		defer m.loops.Done()
		m.loop(ctx)
	}()
}

// Wait blocks until the goroutine Start started has returned, which it
// does once Start's context ends.
func (m *Mapper) Wait() { m.loops.Wait() }

func (m *Mapper) loop(ctx context.Context) {
	defer m.kube.close()
	for {
		start := m.clock.Now()
		m.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(gpu.UntilNext(m.clock, start, m.opts.Refresh)):
		}
	}
}

// Refresh fetches the pod-resources mapping now, in the caller's
// goroutine, and then the pod metadata; when the pod-resources query
// fails the last good mapping stays in use, and when only the metadata
// read fails the fresh mapping is used with the last good metadata.
func (m *Mapper) Refresh(ctx context.Context) {
	resp, err := m.kube.list(ctx)
	var metaErr error
	if err == nil && m.kube.metaSrc != "" {
		var md *podMetadata
		if md, metaErr = m.kube.metadata(ctx); metaErr == nil {
			m.meta.Store(md)
			m.logClipped(md)
		}
	}
	if (err != nil || metaErr != nil) && ctx.Err() != nil {
		return // stopped: not a failure of the kubelet's
	}
	var fresh *Mapping
	if err == nil {
		fresh = newMapping(resp, m.meta.Load(), metaErr != nil)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := &m.status
	if err != nil {
		st.ErrorsTotal++
		if st.Up || st.ErrorsTotal == 1 {
			level.Warn(m.logger).Log("msg", "kubelet pod-resources refresh failed; keeping the last good mapping", "err", err)
		}
		st.Up = false
		return
	}
	if !st.Up && st.ErrorsTotal > 0 {
		level.Info(m.logger).Log("msg", "kubelet pod-resources refresh recovered", "pods", fresh.pods)
	}
	m.mapping.Store(fresh)
	st.Up = true
	st.LastSuccess = m.clock.Now()
	st.PodsMapped = fresh.pods
	if m.kube.metaSrc != "" {
		m.noteMetadata(metaErr)
	}
}

// noteMetadata records the outcome of a pod metadata read, logging a
// failure after a success (or the first) and a recovery; m.mu is held.
func (m *Mapper) noteMetadata(err error) {
	md := &m.status.Metadata
	if err != nil {
		md.ErrorsTotal++
		if md.Up || md.ErrorsTotal == 1 {
			level.Warn(m.logger).Log("msg", "pod metadata read failed; pods new since the last good read have no labels or container IDs", "err", err)
		}
		md.Up = false
		return
	}
	if !md.Up && md.ErrorsTotal > 0 {
		level.Info(m.logger).Log("msg", "pod metadata read recovered", "source", md.Source)
	}
	md.Up = true
	md.LastSuccess = m.clock.Now()
}

// logClipped logs, each at most every clipLogEvery, the pods of which
// the pod metadata's bounds kept less than they have: the others' are
// read all the same.
func (m *Mapper) logClipped(md *podMetadata) {
	now := m.clock.Now()
	for _, p := range md.clipped {
		pod := p.Namespace + "/" + p.Name
		if held, ok := m.clipLines.NoteAt(pod, now); ok {
			level.Warn(m.logger).Log("msg", "pod metadata: a pod of more labels or container statuses than the bounds keep; its name, namespace and UID are kept, the other pods read",
				"source", m.kube.source(), "pod", pod, "uid", p.UID, "cut", p.clipped, "held_back", held)
		}
	}
}
