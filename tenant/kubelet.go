package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// PodRef is a pod (and container) that a process or device belongs to.
type PodRef struct {
	Namespace string
	Name      string
	UID       string // "" when only pod-resources named the pod
	Container string
	Labels    map[string]string // nil without pod metadata
}

// kubeMapping is one consistent view of which pods hold which devices.
type kubeMapping struct {
	// byDevice maps a device ID with any "::<replica>" suffix removed (GPU
	// UUID or MIG UUID) to the containers holding it.
	byDevice map[string][]PodRef
	// meta is pod metadata by UID, from the optional metadata provider.
	meta map[string]*podMeta
	// metaByName is the same keyed "namespace/name".
	metaByName map[string]*podMeta
	// containerByID maps a container ID to the container name.
	containerByID map[string]string
	pods          int
}

type podMeta struct {
	Namespace, Name, UID string
	Labels               map[string]string
}

// deviceBase strips the shared-replica suffix the NVIDIA device plugin adds
// to time-sliced and MPS replicas ("GPU-abc::3" -> "GPU-abc").
func deviceBase(id string) string {
	if i := strings.Index(id, "::"); i >= 0 {
		return id[:i]
	}
	return id
}

// mappingFromPodResources builds the device map from a List answer.
func mappingFromPodResources(resp *podresourcesv1.ListPodResourcesResponse) *kubeMapping {
	m := &kubeMapping{byDevice: map[string][]PodRef{}}
	pods := map[string]bool{}
	for _, pr := range resp.GetPodResources() {
		if pr == nil || pr.GetName() == "" {
			continue
		}
		for _, c := range pr.GetContainers() {
			if c == nil {
				continue
			}
			for _, d := range c.GetDevices() {
				if d == nil {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					base := deviceBase(id)
					if base == "" {
						continue
					}
					ref := PodRef{Namespace: pr.GetNamespace(), Name: pr.GetName(), Container: c.GetName()}
					if !containsRef(m.byDevice[base], ref) {
						m.byDevice[base] = append(m.byDevice[base], ref)
					}
					pods[pr.GetNamespace()+"/"+pr.GetName()] = true
				}
			}
		}
	}
	for k := range m.byDevice {
		refs := m.byDevice[k]
		sort.Slice(refs, func(i, j int) bool {
			if refs[i].Namespace != refs[j].Namespace {
				return refs[i].Namespace < refs[j].Namespace
			}
			if refs[i].Name != refs[j].Name {
				return refs[i].Name < refs[j].Name
			}
			return refs[i].Container < refs[j].Container
		})
	}
	m.pods = len(pods)
	return m
}

func containsRef(refs []PodRef, r PodRef) bool {
	for _, x := range refs {
		if x.Namespace == r.Namespace && x.Name == r.Name && x.Container == r.Container {
			return true
		}
	}
	return false
}

// podsOn returns the distinct containers holding any of the device IDs.
func (m *kubeMapping) podsOn(ids ...string) []PodRef {
	if m == nil {
		return nil
	}
	var out []PodRef
	for _, id := range ids {
		if id == "" {
			continue
		}
		for _, r := range m.byDevice[id] {
			if !containsRef(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// resolvePod finds the pod of a process (or device) from its cgroup facts
// and the devices it runs on:
//  1. the pod UID from the cgroup, with pod metadata when the provider knows it;
//  2. otherwise the single container that holds the device(s), if only one does;
//  3. otherwise a pod known only by its UID.
func (m *kubeMapping) resolvePod(cg CgroupInfo, deviceIDs ...string) *PodRef {
	cands := m.podsOn(deviceIDs...)
	if cg.PodUID != "" && m != nil {
		if md := m.meta[cg.PodUID]; md != nil {
			ref := &PodRef{Namespace: md.Namespace, Name: md.Name, UID: md.UID, Labels: md.Labels}
			if cg.ContainerID != "" {
				ref.Container = m.containerByID[cg.ContainerID]
			}
			if ref.Container == "" {
				// the container of this pod that holds the device
				var names []string
				for _, c := range cands {
					if c.Namespace == md.Namespace && c.Name == md.Name {
						names = append(names, c.Container)
					}
				}
				if len(names) == 1 {
					ref.Container = names[0]
				}
			}
			return ref
		}
	}
	if len(cands) == 1 {
		ref := cands[0]
		ref.UID = cg.PodUID
		if m != nil {
			if md := m.metaByName[ref.Namespace+"/"+ref.Name]; md != nil {
				ref.Labels = md.Labels
				if ref.UID == "" {
					ref.UID = md.UID
				}
			}
		}
		return &ref
	}
	if cg.PodUID != "" {
		return &PodRef{UID: cg.PodUID}
	}
	return nil
}

// kubeClient talks to the kubelet pod-resources socket and, optionally,
// reads pod metadata (labels, UIDs) from a file or URL.
type kubeClient struct {
	socket   string // as configured, for error messages
	conn     *grpc.ClientConn
	client   podresourcesv1.PodResourcesListerClient
	timeout  time.Duration
	metaSrc  string
	httpc    *http.Client
	maxBytes int64
}

func newKubeClient(socket, metaSrc string, httpc *http.Client, timeout time.Duration) (*kubeClient, error) {
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
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("pod-resources socket %s: %w", socket, err)
	}
	return &kubeClient{
		socket: socket, conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn),
		timeout: timeout, metaSrc: metaSrc, httpc: httpc, maxBytes: 64 << 20,
	}, nil
}

func (k *kubeClient) close() error { return k.conn.Close() }

// fetch asks the kubelet for the current mapping.
func (k *kubeClient) fetch(ctx context.Context) (*kubeMapping, error) {
	cctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	resp, err := k.client.List(cctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: List: %w", k.socket, err)
	}
	m := mappingFromPodResources(resp)
	if k.metaSrc != "" {
		metas, cids, err := k.fetchMeta(ctx)
		if err != nil {
			return nil, err
		}
		m.meta, m.metaByName, m.containerByID = map[string]*podMeta{}, map[string]*podMeta{}, cids
		for _, md := range metas {
			m.meta[md.UID] = md
			m.metaByName[md.Namespace+"/"+md.Name] = md
		}
	}
	return m, nil
}

// podList is the part of a Kubernetes PodList (as served by the kubelet's
// /pods endpoint or `kubectl get pods -o json`) that attribution needs.
type podList struct {
	Items []struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			UID       string            `json:"uid"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Status struct {
			ContainerStatuses []struct {
				Name        string `json:"name"`
				ContainerID string `json:"containerID"`
			} `json:"containerStatuses"`
		} `json:"status"`
	} `json:"items"`
}

// parsePodList decodes pod metadata: by UID, and container ID -> name.
func parsePodList(src string, data []byte) ([]*podMeta, map[string]string, error) {
	var pl podList
	if err := json.Unmarshal(data, &pl); err != nil {
		return nil, nil, fmt.Errorf("pod metadata %s: %w", src, err)
	}
	var out []*podMeta
	cids := map[string]string{}
	for _, it := range pl.Items {
		md := it.Metadata
		if md.UID == "" || md.Name == "" {
			continue
		}
		out = append(out, &podMeta{Namespace: md.Namespace, Name: md.Name, UID: strings.ToLower(md.UID), Labels: md.Labels})
		for _, cs := range it.Status.ContainerStatuses {
			id := cs.ContainerID
			if i := strings.LastIndex(id, "://"); i >= 0 {
				id = id[i+3:]
			}
			if id != "" {
				cids[strings.ToLower(id)] = cs.Name
			}
		}
	}
	return out, cids, nil
}

func (k *kubeClient) fetchMeta(ctx context.Context) ([]*podMeta, map[string]string, error) {
	var data []byte
	if strings.HasPrefix(k.metaSrc, "http://") || strings.HasPrefix(k.metaSrc, "https://") {
		cctx, cancel := context.WithTimeout(ctx, k.timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(cctx, http.MethodGet, k.metaSrc, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("pod metadata %s: %w", k.metaSrc, err)
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", userAgent)
		resp, err := k.httpc.Do(req)
		if err != nil {
			return nil, nil, fmt.Errorf("pod metadata %s: %w", k.metaSrc, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("pod metadata %s: HTTP %s", k.metaSrc, resp.Status)
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, k.maxBytes+1))
		if err != nil {
			return nil, nil, fmt.Errorf("pod metadata %s: %w", k.metaSrc, err)
		}
	} else {
		var err error
		data, err = os.ReadFile(strings.TrimPrefix(k.metaSrc, "file://"))
		if err != nil {
			return nil, nil, fmt.Errorf("pod metadata: %w", err)
		}
	}
	if int64(len(data)) > k.maxBytes {
		return nil, nil, fmt.Errorf("pod metadata %s: larger than %d bytes", k.metaSrc, k.maxBytes)
	}
	return parsePodList(k.metaSrc, data)
}
