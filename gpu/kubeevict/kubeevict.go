// Package kubeevict applies rebalancing plans on Kubernetes from inside the
// exporter: it evicts the pod of every move through the API server's
// Eviction API, so that PodDisruptionBudgets hold, and lets the pod's
// controller recreate it and the scheduler place it (a move's target GPU
// is advisory). It is deploy/hooks/kubernetes-evict.sh built in, for
// images without a shell, jq or kubectl (the chart's image is distroless),
// and talks to the API server with the pod's service account token, as
// the pod metadata reader does (package kube).
//
// Each pod is read first (GET, RBAC pods get): one that an eviction would
// not move is refused, as kubectl drain refuses it (ErrNotMovable: no
// controller, a DaemonSet's, a static pod's mirror), and the eviction is
// pinned to the UID read (its precondition).
//
// An eviction a budget forbids (HTTP 429) is reported in the error, once:
// it is not retried here; the tuner plans again later or not. A plan with
// DryRun is sent with dryRun=All: the API server checks it, budgets
// included, and changes nothing. MIG layout changes are refused: on
// Kubernetes they belong to the GPU Operator's MIG manager. An eviction is
// made when the API server accepts it (200 or 201), the pod then
// terminating gracefully on its own: nothing here waits for that. No
// redirect is followed.
//
// Evictor implements gpu.Rebalancer and gpu.PlacementActuator.
package kubeevict

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/gpu/rebalance"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

// Name is what selects the built-in evictor where a rebalancing hook
// program is named (--tuner.rebalance-hook).
const Name = "builtin:kubernetes-evict"

// Service-account defaults: where Kubernetes mounts a pod's token and CA.
const (
	DefaultAPIServer = "https://kubernetes.default.svc"
	DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	DefaultCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// Options configure an Evictor.
type Options struct {
	// APIServer is the API server's https:// URL (scheme, host, port; no
	// user information: TokenFile authenticates).
	APIServer string
	// TokenFile holds the bearer token, read again for every request.
	TokenFile string
	// CAFile verifies the API server; with HTTPClient nil it is required.
	CAFile string
	// HTTPClient, when set, is used instead of a client with CAFile's roots.
	HTTPClient *http.Client
	// Timeout bounds one plan; default rebalance.DefaultTimeout.
	Timeout time.Duration
	// TimeoutName is what sets Timeout (the command line's flag), named in
	// the error of a plan it stops; "" names none.
	TimeoutName string
	Logger      log.Logger
}

// Evictor evicts the pods of a plan's moves. It is safe for concurrent use.
type Evictor struct {
	base   *url.URL
	opts   Options
	httpc  *http.Client
	logger log.Logger
}

var (
	_ gpu.Rebalancer        = (*Evictor)(nil)
	_ gpu.PlacementActuator = (*Evictor)(nil)
	_ gpu.CapabilityLister  = (*Evictor)(nil)
)

// New returns an Evictor for opts. It reads the CA file now (a bad one
// fails at start) and the token at each eviction.
func New(opts Options) (*Evictor, error) {
	u, err := apiServerURL(opts.APIServer)
	if err != nil {
		return nil, err
	}
	if opts.TokenFile == "" {
		return nil, errors.New("kubernetes eviction: no bearer token file")
	}
	httpc := opts.HTTPClient
	if httpc == nil {
		if opts.CAFile == "" {
			return nil, errors.New("kubernetes eviction: no CA file to verify the API server with")
		}
		if httpc, err = kube.ClientWithCA(opts.CAFile); err != nil {
			return nil, fmt.Errorf("kubernetes eviction: %w", err)
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = rebalance.DefaultTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = log.NewNopLogger()
	}
	c := *httpc
	c.CheckRedirect = noRedirect
	return &Evictor{base: u, opts: opts, httpc: &c, logger: logger}, nil
}

// apiServerURL is the API server's URL s, https://HOST[:PORT] with no
// user information: the bearer token file authenticates the evictions, a
// password in the URL was sent by no request. Its errors write s as
// urlmask.DisplayURL does, its password and query values masked: the
// error of a URL refused is logged (the exporter's actuators).
func apiServerURL(s string) (*url.URL, error) {
	shown := urlmask.DisplayURL(s)
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("kubernetes eviction: API server %q: %s", shown, urlmask.URLParseReason(s, err))
	case u.User != nil:
		return nil, fmt.Errorf("kubernetes eviction: API server %q holds user information: the bearer token file authenticates, not a user or password in the URL; want https://HOST[:PORT]", shown)
	case u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "":
		return nil, fmt.Errorf("kubernetes eviction: API server %q is not an https://HOST[:PORT] URL", shown)
	}
	u.Path = ""
	return u, nil
}

// noRedirect is the CheckRedirect of the evictions and the reads of their
// pods: an API server answers them itself and never redirects one, so
// none is followed. Go's
// client follows a 301, 302 or 303 as a GET without the body, and a page
// that answered that GET with 200 (a proxy's, a login's) was taken for the
// eviction made; a 307 or 308 sends the POST and its bearer token on to
// where the redirect leads.
func noRedirect(req *http.Request, _ []*http.Request) error {
	code := 0
	if req.Response != nil {
		code = req.Response.StatusCode
	}
	return fmt.Errorf("refused a redirect (HTTP %d to %s): an API server answers itself", code, clip.Text(req.URL.Scheme+"://"+req.URL.Host+req.URL.Path, 120))
}

// RunsHooks implements gpu.Hooked: a plan's evictions wait on the API
// server, up to the timeout.
func (e *Evictor) RunsHooks() bool { return true }

// Capabilities lists the placement knob on every GPU: evictions move pods.
func (e *Evictor) Capabilities(string) []gpu.Knob { return []gpu.Knob{gpu.KnobPlacement} }

// MoveProcess cannot evict a process: a pod is found by name, not PID.
func (e *Evictor) MoveProcess(_ context.Context, pid uint32, toUUID string) error {
	return fmt.Errorf("kubernetes eviction: the move of PID %d to %s names no pod", pid, toUUID)
}

// Rebalance checks the whole plan (every move names a pod, no MIG layout)
// and then reads and evicts each move's pod once, in order; the error
// names every eviction that failed, a PodDisruptionBudget's refusal (429)
// as such (ErrBudget), a pod an eviction would not move as such
// (ErrNotMovable). A pod the API server answers is gone (its NotFound)
// counts as moved, as kubectl drain counts it. When every move was so
// refused, nothing changed and the error is also gpu.ErrBusy: the plan
// was refused. When some
// evictions were made and others failed, the error is a
// *gpu.PartialError naming the moves made.
func (e *Evictor) Rebalance(ctx context.Context, p gpu.Plan) error {
	if err := rebalance.Validate(p); err != nil {
		return err
	}
	if len(p.MIG) > 0 {
		return fmt.Errorf("kubernetes eviction: %d MIG layout changes: not applied here; use the GPU Operator's MIG manager (label the node nvidia.com/mig.config)", len(p.MIG))
	}
	for i, m := range p.Moves {
		if m.Pod == nil {
			return fmt.Errorf("kubernetes eviction: move %d (tenant %q) names no pod", i+1, m.Tenant)
		}
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	var errs []error
	var evicted []int
	refusals := 0
	for i, m := range p.Moves {
		var err error
		if poduid.Static(m.Pod.UID) {
			// nothing sent: an eviction would delete the mirror pod
			// alone, which the kubelet makes again, the pod running on
			err = fmt.Errorf("%w: a static pod (UID %s, its manifest's hash): the API server holds only its mirror, whose eviction leaves the pod running (move it in the node's manifests)", ErrNotMovable, m.Pod.UID)
		} else {
			err = e.move(ctx, *m.Pod, p.DryRun)
		}
		if errors.Is(err, errPodGone) {
			// as kubectl drain takes it: the pod is off the GPU already
			evicted = append(evicted, i)
			level.Info(e.logger).Log("msg", "pod already gone, nothing to evict", "pod", m.Pod.Namespace+"/"+m.Pod.Name, "tenant", m.Tenant, "dry_run", p.DryRun, "reason", p.Reason)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("eviction of %s/%s (tenant %s): %w", m.Pod.Namespace, m.Pod.Name, m.Tenant, err))
			if errors.Is(err, ErrBudget) || errors.Is(err, ErrNotMovable) {
				refusals++
			}
			continue
		}
		evicted = append(evicted, i)
		level.Info(e.logger).Log("msg", "evicted pod", "pod", m.Pod.Namespace+"/"+m.Pod.Name, "tenant", m.Tenant, "dry_run", p.DryRun, "reason", p.Reason)
	}
	if len(errs) == 0 {
		return nil
	}
	err := fmt.Errorf("kubernetes eviction (%d moves, dry run %v): %w", len(p.Moves), p.DryRun, errors.Join(errs...))
	if ctx.Err() != nil && parent.Err() == nil {
		err = fmt.Errorf("%w; stopped at %s", err, command.TimeoutText(e.opts.Timeout, e.opts.TimeoutName))
	}
	switch {
	case refusals == len(p.Moves):
		// Nothing was evicted: a budget refused every eviction, or an
		// eviction would not have moved the pod (ErrNotMovable), so the
		// plan was refused (the tuner's outcome "refused", not "failed").
		return rebalance.Refused(err)
	case len(evicted) > 0:
		// Applied in part: the error says which moves were made.
		return &gpu.PartialError{Applied: evicted, Err: err}
	}
	return err
}

// ErrBudget marks an eviction refused for now (HTTP 429): a
// PodDisruptionBudget allows no disruption, or (rarely) the API server's
// priority and fairness throttled the request; the API server's message,
// in the error, says which.
var ErrBudget = errors.New("refused for now: a PodDisruptionBudget allows no disruption (or the API server throttles)")

// eviction is a policy/v1 Eviction.
type eviction struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	DeleteOptions *deleteOptions `json:"deleteOptions,omitempty"`
}

// deleteOptions are an Eviction's: a dry run, and the UID of the pod
// meant (a precondition: a pod of its name made since is not evicted).
type deleteOptions struct {
	DryRun        []string       `json:"dryRun,omitempty"`
	Preconditions *preconditions `json:"preconditions,omitempty"`
}

// preconditions are an eviction's: the UID of the pod meant.
type preconditions struct {
	UID string `json:"uid"`
}

// evict sends one Eviction for pod, pinned to the UID uid (the pod's as
// its GET read it, see check).
func (e *Evictor) evict(ctx context.Context, pod gpu.Pod, uid string, dryRun bool) error {
	body := eviction{APIVersion: "policy/v1", Kind: "Eviction"}
	body.Metadata.Name, body.Metadata.Namespace = pod.Name, pod.Namespace
	body.DeleteOptions = &deleteOptions{Preconditions: &preconditions{uid}}
	if dryRun {
		body.DeleteOptions.DryRun = []string{"All"}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := e.send(ctx, http.MethodPost, podPath(pod)+"/eviction", data)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	st, msg := readStatus(resp.Body)
	status := statusText(resp)
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		return nil
	case podGone(resp, st, pod):
		return fmt.Errorf("%w (HTTP %s: %s)", errPodGone, status, msg)
	case resp.StatusCode == http.StatusConflict && isPodKind(st.Details.Kind) && st.Details.Name == pod.Name &&
		strings.Contains(st.Message, "recondition"):
		// the precondition's refusal (the API server's Status of the pod
		// saying so): the pod of this name is another than the one read
		// (made since), left be; another conflict (a
		// PodDisruptionBudget's update) fails as any other status
		return fmt.Errorf("HTTP %s: the pod %s/%s is not the one planned (UID %s): made since, or the planned process is another pod's; not evicted: %s", status, pod.Namespace, pod.Name, uid, msg)
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w (HTTP %s: %s)", ErrBudget, status, msg)
	default:
		return fmt.Errorf("HTTP %s: %s", status, msg)
	}
}

// podPath is the API path of pod.
func podPath(pod gpu.Pod) string {
	return "/api/v1/namespaces/" + pod.Namespace + "/pods/" + pod.Name
}

// send makes one request of the API server at path, with the token read
// now, body (nil: none) as JSON.
func (e *Evictor) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u := *e.base
	u.Path = path
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	tok, err := kube.ReadBearerToken(e.opts.TokenFile)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", kube.UserAgent())
	return e.httpc.Do(req)
}

// statusText is an answer's status code and its standard text only: the
// reason phrase is the server's own text, unbounded but by the client's
// header limit.
func statusText(resp *http.Response) string {
	return fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}

// podGone says whether an answer is the API server's own that pod is
// gone (its NotFound of the pod); a 404 of anything else (a proxy's, a
// wrong --kubernetes.api-server path) fails as any other status does.
func podGone(resp *http.Response, st apiStatus, pod gpu.Pod) bool {
	return resp.StatusCode == http.StatusNotFound && st.Reason == "NotFound" && st.Details.Kind == "pods" && st.Details.Name == pod.Name
}

// isPodKind says whether a Status's details name a pod: the eviction's
// own precondition check names the kind "Pod", storage's "pods".
func isPodKind(kind string) bool { return strings.EqualFold(strings.TrimSuffix(kind, "s"), "pod") }

// errPodGone marks an eviction the API server answered with the pod's
// NotFound: the pod is gone already (deleted, or evicted by another).
var errPodGone = errors.New("the pod is gone already")

// maxMessage bounds what of an answer's message an error and its log line
// carry (an API server's Status message is not bounded).
const maxMessage = 256

// apiStatus is what an answer of the API server says: a Kubernetes Status's
// message, reason and object.
type apiStatus struct {
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Details struct {
		Name string `json:"name"`
		Kind string `json:"kind"`
	} `json:"details"`
}

// readStatus reads an answer of the API server (its first 64 KiB): its Status,
// and what an error says of it, the Status's message (else the start of
// the body), clipped.
func readStatus(r io.Reader) (apiStatus, string) {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var st apiStatus
	if json.Unmarshal(b, &st) != nil {
		st = apiStatus{}
	}
	msg := cmp.Or(st.Message, strings.TrimSpace(string(b)))
	return st, clip.Text(msg, maxMessage)
}
