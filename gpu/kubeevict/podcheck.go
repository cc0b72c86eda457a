package kubeevict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/clip"
)

// ErrNotMovable marks a move refused because an eviction would not move
// its pod: no controller would make it again elsewhere (a bare pod, which
// the eviction deletes for good), or one would make it again on the same
// node (a DaemonSet's), or the API server holds only its mirror (a static
// pod, which the kubelet keeps running). kubectl drain refuses these
// pods too, by default. The move counts as refused, as one a budget
// refuses does.
var ErrNotMovable = errors.New("not evicted: an eviction would not move this pod")

// maxPodBytes bounds the pod's answer read: a pod object is at most what
// the API server's store takes (etcd's request limit, 1.5 MiB).
const maxPodBytes = 2 << 20

// mirrorAnnotation marks a static pod's mirror in the API server.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// podObject is what a pod's GET says of it here.
type podObject struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		UID             string            `json:"uid"`
		Annotations     map[string]string `json:"annotations"`
		OwnerReferences []struct {
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Controller *bool  `json:"controller"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
}

// move evicts pod once its GET says that an eviction moves it (check),
// pinned to the UID that GET read.
func (e *Evictor) move(ctx context.Context, pod gpu.Pod, dryRun bool) error {
	uid, err := e.check(ctx, pod)
	if err != nil {
		return err
	}
	return e.evict(ctx, pod, uid, dryRun)
}

// check reads pod from the API server and returns its UID where an
// eviction of it moves it: a controller other than a DaemonSet owns it
// and it is no static pod's mirror (else ErrNotMovable). Where the move
// names a UID, the pod read must have it (a pod of the name made since is
// not the one planned); where it names none, the UID read pins the
// eviction, so that no pod made after the read is evicted. The API
// server's NotFound of the pod is errPodGone, a 429 ErrBudget.
func (e *Evictor) check(ctx context.Context, pod gpu.Pod) (string, error) {
	resp, err := e.send(ctx, http.MethodGet, podPath(pod), nil)
	if err != nil {
		return "", fmt.Errorf("reading the pod: %w", err)
	}
	defer resp.Body.Close()
	status := statusText(resp)
	if resp.StatusCode != http.StatusOK {
		st, msg := readStatus(resp.Body)
		switch {
		case podGone(resp, st, pod):
			return "", fmt.Errorf("%w (HTTP %s: %s)", errPodGone, status, msg)
		case resp.StatusCode == http.StatusTooManyRequests:
			return "", fmt.Errorf("reading the pod: %w (HTTP %s: %s)", ErrBudget, status, msg)
		}
		return "", fmt.Errorf("reading the pod: HTTP %s: %s", status, msg)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPodBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the pod: %w", err)
	}
	if len(b) > maxPodBytes {
		return "", fmt.Errorf("reading the pod: HTTP %s: an answer over %d bytes, more than a pod", status, maxPodBytes)
	}
	var p podObject
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("reading the pod: HTTP %s: not a pod: %s", status, clip.Text(err.Error(), maxMessage))
	}
	md := p.Metadata
	if md.Namespace != pod.Namespace || md.Name != pod.Name || md.UID == "" {
		return "", fmt.Errorf("reading the pod: HTTP %s: the answer is not the pod (it names %s/%s, UID %q)",
			status, clip.Text(md.Namespace, 64), clip.Text(md.Name, 64), clip.Text(md.UID, 64))
	}
	if pod.UID != "" && !strings.EqualFold(pod.UID, md.UID) {
		return "", fmt.Errorf("the pod %s/%s is not the one planned (UID %s, the API server's %s): made since, or the planned process is another pod's; not evicted",
			pod.Namespace, pod.Name, pod.UID, clip.Text(md.UID, 64))
	}
	if _, ok := md.Annotations[mirrorAnnotation]; ok {
		return "", fmt.Errorf("%w: a static pod's mirror (annotation %s): its eviction leaves the pod running (move it in the node's manifests)", ErrNotMovable, mirrorAnnotation)
	}
	controlled := false
	for _, o := range md.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			controlled = true
			switch o.Kind {
			case "Node":
				return "", fmt.Errorf("%w: a static pod's mirror (its controller is the Node %s): its eviction leaves the pod running (move it in the node's manifests)", ErrNotMovable, clip.Text(o.Name, 64))
			case "DaemonSet":
				return "", fmt.Errorf("%w: its controller is the DaemonSet %s, which makes it again on the same node", ErrNotMovable, clip.Text(o.Name, 64))
			}
		}
	}
	if !controlled {
		return "", fmt.Errorf("%w: no controller owns it (no ownerReference with controller true): evicted, it would be deleted for good, its workload stopped, not moved", ErrNotMovable)
	}
	return md.UID, nil
}
