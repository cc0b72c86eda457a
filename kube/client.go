package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/vgpu-exporter/vgpu_exporter/internal/fileread"
	"github.com/vgpu-exporter/vgpu_exporter/internal/redirect"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
)

// UserAgent names the exporter in its requests to the kubelet (the pod
// metadata, and the pod-resources gRPC calls, where gRPC adds its own
// after it) and the API server: vgpu_exporter/<version> where the build
// set the version, vgpu_exporter without it.
func UserAgent() string {
	if version.Version == "" {
		return "vgpu_exporter"
	}
	return "vgpu_exporter/" + version.Version
}

// kubeClient talks to the kubelet pod-resources socket and, optionally,
// reads pod metadata (labels, UIDs) from a file or URL.
type kubeClient struct {
	socket   string // as configured, for error messages
	conn     *grpc.ClientConn
	client   podresourcesv1.PodResourcesListerClient
	timeout  time.Duration
	metaSrc  string       // the request's; source() in errors
	httpc    *http.Client // its redirects follow redirect.SameOrigin
	maxBytes int64
	// tokenFile, when set, holds the bearer token of metadata requests.
	tokenFile string
}

// maxTokenBytes bounds a bearer token file: service account tokens are a
// few KiB.
const maxTokenBytes = 64 << 10

// bearerToken reads the token file now, so that a rotated token is used at
// once.
func (k *kubeClient) bearerToken() (string, error) {
	tok, err := ReadBearerToken(k.tokenFile)
	if err != nil {
		return "", fmt.Errorf("pod metadata %s: %w", k.source(), err)
	}
	return tok, nil
}

// ReadBearerToken reads a bearer token (a service account token) from
// file: one line, not empty. Callers read it for every request, so that a
// rotated token is used at once.
func ReadBearerToken(file string) (string, error) {
	b, err := fileread.Regular(file, maxTokenBytes)
	if err != nil {
		return "", fmt.Errorf("bearer token: %w", err)
	}
	return parseBearerToken(file, b)
}

// parseBearerToken is the token that file's contents b hold: one line of
// visible ASCII (a token's bytes: a JWT's base64url and dots), with
// white space around it.
func parseBearerToken(file string, b []byte) (string, error) {
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("bearer token %s: empty", file)
	}
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("bearer token %s: more than one line", file)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return "", fmt.Errorf("bearer token %s: byte %d is %#02x, which no token holds (visible ASCII only)", file, i+1, c)
		}
	}
	return tok, nil
}

// maxCABytes bounds a CA file: a bundle of every public root is under
// 300 KiB.
const maxCABytes = 4 << 20

// clientWithCA is ClientWithCA for pod metadata.
func clientWithCA(caFile string) (*http.Client, error) {
	c, err := ClientWithCA(caFile)
	if err != nil {
		return nil, fmt.Errorf("pod metadata %w", err)
	}
	return c, nil
}

// ClientWithCA returns an HTTP client that verifies servers with the PEM
// certificates of caFile (a service account's ca.crt).
func ClientWithCA(caFile string) (*http.Client, error) {
	pem, err := fileread.Regular(caFile, maxCABytes)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

func newKubeClient(socket, metaSrc string, httpc *http.Client, refresh, timeout time.Duration) (*kubeClient, error) {
	target := socket
	switch {
	case strings.HasPrefix(target, "unix:"):
	case filepath.IsAbs(target):
		target = "unix://" + socket
	default:
		target = "unix:" + socket
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(connectParams(refresh, timeout)),
		grpc.WithUserAgent(UserAgent()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("pod-resources socket %s: %w", socket, err)
	}
	return &kubeClient{
		socket: socket, conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn),
		timeout: timeout, metaSrc: metaSrc, httpc: redirect.Client(httpc), maxBytes: 64 << 20,
	}, nil
}

// connectParams are the pod-resources connection's: after a failed
// connection gRPC tries again after a backoff that grows to at most the
// refresh interval, jitter included (gRPC's default grows to two minutes,
// so a kubelet socket back after a long outage stayed unused that long).
// A socket that comes back is then connected to within a refresh interval
// and used by the refresh after. A connection attempt is given the
// refresh's timeout.
func connectParams(refresh, timeout time.Duration) grpc.ConnectParams {
	b := backoff.DefaultConfig
	b.MaxDelay = time.Duration(float64(refresh) / (1 + b.Jitter))
	b.BaseDelay = min(b.BaseDelay, b.MaxDelay) // the first retry's delay is not capped
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: timeout}
}

func (k *kubeClient) close() error { return k.conn.Close() }

// list asks the kubelet which containers hold which devices; an answer of
// more than maxAnswerDeviceIDs GPU device IDs is refused.
func (k *kubeClient) list(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	resp, err := k.client.List(cctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: List: %w", k.socket, err)
	}
	if n := answerDeviceIDs(resp); n > maxAnswerDeviceIDs {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: List: an answer of %d GPU device IDs, more than %d, all containers together", k.socket, n, maxAnswerDeviceIDs)
	}
	return resp, nil
}

// metadata reads the pod metadata source and parses it; its errors name
// the source.
func (k *kubeClient) metadata(ctx context.Context) (*podMetadata, error) {
	data, err := k.fetchMeta(ctx)
	if err != nil {
		return nil, err
	}
	return newPodMetadata(k.source(), data)
}

// podMetadata is parsed pod metadata: pods by UID and by
// "namespace/name", and container names by container ID. It is not
// changed once made, so mappings share it.
type podMetadata struct {
	byUID, byName map[string]*podMeta
	containerByID map[string]string
	// clipped are the pods of which the list's bounds kept less than
	// they have (podMeta.clipped), for a log line
	clipped []*podMeta
}

// newPodMetadata parses podList, a PodList in JSON as the kubelet's /pods
// serves it; src names it in errors.
//
// The API server's mirror of a static pod has a UID of its own; the static
// pod's cgroup names the pod by its manifest's hash, which the mirror's
// mirrorAnnotation gives. A mirror pod is known by that hash (as the
// kubelet's /pods knows the static pod), and by its own UID too, but where
// another pod of the list claims the same hash, or has it for its UID:
// then neither is known by it.
func newPodMetadata(src string, podList []byte) (*podMetadata, error) {
	metas, cids, err := parsePodList(src, podList)
	if err != nil {
		return nil, err
	}
	md := &podMetadata{byUID: map[string]*podMeta{}, byName: map[string]*podMeta{}, containerByID: cids}
	claims := map[string]int{}
	for _, p := range metas {
		md.byUID[p.UID] = p
		if p.mirrorOf != "" {
			claims[p.mirrorOf]++
		}
		if p.clipped != "" {
			md.clipped = append(md.clipped, p)
		}
	}
	for _, p := range metas {
		if h := p.mirrorOf; h != "" && claims[h] == 1 && md.byUID[h] == nil {
			md.byUID[h] = p
			p.UID = h // the static pod's, as its processes and the kubelet know it
		}
		md.byName[p.Namespace+"/"+p.Name] = p
	}
	return md, nil
}

// newMapping is NewMapping with the pod metadata md (nil: none), stale
// when it is the last good read's, the latest read having failed.
func newMapping(resp *podresourcesv1.ListPodResourcesResponse, md *podMetadata, stale bool) *Mapping {
	m := NewMapping(resp)
	if md != nil {
		m.meta, m.metaByName, m.containerByID = md.byUID, md.byName, md.containerByID
		m.metaStale = stale
	}
	return m
}

// NewMappingWithMetadata is NewMapping with pod metadata (UIDs, labels,
// container IDs) from podList, a PodList in JSON as the kubelet's /pods
// serves it; src names it in errors.
func NewMappingWithMetadata(resp *podresourcesv1.ListPodResourcesResponse, src string, podList []byte) (*Mapping, error) {
	md, err := newPodMetadata(src, podList)
	if err != nil {
		return nil, err
	}
	return newMapping(resp, md, false), nil
}

// source is the pod metadata source as errors name it: SourceName.
func (k *kubeClient) source() string { return SourceName(k.metaSrc) }

// fetchMeta reads the pod metadata source whole.
func (k *kubeClient) fetchMeta(ctx context.Context) ([]byte, error) {
	var data []byte
	if strings.HasPrefix(k.metaSrc, "http://") || strings.HasPrefix(k.metaSrc, "https://") {
		cctx, cancel := context.WithTimeout(ctx, k.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(cctx, http.MethodGet, k.metaSrc, nil)
		if err != nil {
			return nil, fmt.Errorf("pod metadata %s: %s", k.source(), urlmask.URLParseReason(k.metaSrc, err))
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", UserAgent())
		if k.tokenFile != "" {
			tok, err := k.bearerToken()
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := k.httpc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("pod metadata %s: %w", k.source(), urlmask.Unwrap(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			// The status code only: the reason phrase is the server's text.
			return nil, fmt.Errorf("pod metadata %s: HTTP %d %s", k.source(), resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		if data, err = fileread.All(resp.Body, k.maxBytes, k.source()); err != nil {
			return nil, fmt.Errorf("pod metadata: %w", err)
		}
	} else {
		var err error
		if data, err = fileread.Regular(strings.TrimPrefix(k.metaSrc, "file://"), k.maxBytes); err != nil {
			return nil, fmt.Errorf("pod metadata: %w", err)
		}
	}
	return data, nil
}

// KubeletPods, as Options.PodMetadata, reads pod metadata from the
// kubelet's /pods at Options.KubeletAddress (a file of that name is
// ./kubelet).
const KubeletPods = "kubelet"

// kubeletPort is the port of the kubelet's https API.
const kubeletPort = "10250"

// KubeletPodsURL is the URL of the kubelet's /pods at addr: a host, that
// is an IP address (an IPv6 one bare or in brackets) or a DNS name, with
// an optional port, 10250 by default. A bare IP address is always a host
// whole, so an IPv6 address with a port needs its brackets
// ([fd00::5]:10250).
func KubeletPodsURL(addr string) (string, error) {
	host, port := addr, kubeletPort
	switch {
	case addr == "":
		return "", errors.New("no kubelet address")
	case net.ParseIP(addr) != nil:
	case strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]"):
		host = addr[1 : len(addr)-1]
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", fmt.Errorf("kubelet address %q: only an IPv6 address goes in brackets", addr)
		}
	case strings.Contains(addr, ":"):
		var err error
		if host, port, err = net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("kubelet address %q: %w (an IPv6 address with a port goes in brackets: [fd00::5]:10250)", addr, err)
		}
		if port == "" {
			return "", fmt.Errorf("kubelet address %q: empty port", addr)
		}
	}
	u := "https://" + net.JoinHostPort(host, port) + "/pods"
	if err := CheckPodMetadataURL(u); err != nil {
		return "", fmt.Errorf("kubelet address %q: %w", addr, err)
	}
	if p, _ := url.Parse(u); p.Hostname() != host || p.Port() != port || p.Path != "/pods" || p.User != nil {
		return "", fmt.Errorf("kubelet address %q: not a host name or IP address with an optional port", addr)
	}
	return u, nil
}

// authority is the part of a URL between its scheme and its path.
func authority(src string) string {
	_, rest, _ := strings.Cut(src, "://")
	a, _, _ := strings.Cut(rest, "/")
	return a
}

// SourceName is how errors, logs and status name a pod metadata source
// src: an http(s) URL with its password and query values masked
// (urlmask.DisplayURL), a file as it is. The request is made to src.
func SourceName(src string) string {
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		return urlmask.DisplayURL(src)
	}
	return src
}

// CheckPodMetadataURL refuses an http(s) pod metadata URL that no request
// could be made to: one that does not parse (an IPv6 address without
// brackets has an "invalid port"), without a host, or with a port that is
// not a number from 1 to 65535. Its errors name the URL by SourceName.
func CheckPodMetadataURL(src string) error {
	shown := SourceName(src)
	u, err := url.Parse(src)
	if err != nil {
		reason := urlmask.URLParseReason(src, err)
		if a := authority(src); strings.Count(a, ":") > 1 && !strings.HasPrefix(a, "[") {
			return fmt.Errorf("pod metadata URL %q: %s (an IPv6 address goes in brackets: https://[fd00::5]:10250/pods)", shown, reason)
		}
		return fmt.Errorf("pod metadata URL %q: %s", shown, reason)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("pod metadata URL %q: the scheme must be http or https", shown)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("pod metadata URL %q: no host", shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("pod metadata URL %q: port %s is not from 1 to 65535", shown, p)
		}
	}
	return nil
}
