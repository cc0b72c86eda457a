package kube

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/vgpu-exporter/vgpu_exporter/internal/poduid"
)

// A pod's labels and container statuses are each decoded into a hundred
// bytes or more from a dozen, so a list of 60 MiB of labels (4 million)
// took a minute of CPU and 480 MiB of heap at every refresh. They are
// bounded pod by pod, so that one tenant's pods cannot make the others'
// unreadable: a pod of more than maxPodLabels labels keeps none of them,
// and one of more than maxPodStatuses container statuses keeps the first
// that many, its name, namespace and UID kept either way. All pods
// together keep at most maxPodListEntries labels and statuses: past that,
// the pod keeping the most loses its labels (else its statuses), and so
// on until the list is within it. A node's pods have a few thousand (110
// pods of 20 labels and 3 containers each: 2,500); a pod a few dozen.
const (
	maxPodLabels      = 1_000
	maxPodStatuses    = 1_000
	maxPodListEntries = 100_000
)

// mirrorAnnotation is the annotation the API server's mirror of a static
// pod carries: the static pod's UID, its manifest's hash, which its
// cgroup names (the mirror's own UID is another).
const mirrorAnnotation = "kubernetes.io/config.mirror"

// podList is the part of a Kubernetes PodList (as served by the kubelet's
// /pods endpoint or `kubectl get pods -o json`) that attribution needs.
type podList struct {
	Items podItems `json:"items"`
}

// podItem is the part of one pod that attribution needs.
type podItem struct {
	Metadata struct {
		Name        string      `json:"name"`
		Namespace   string      `json:"namespace"`
		UID         string      `json:"uid"`
		Labels      labelMap    `json:"labels"`
		Annotations annotations `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		// every container of the pod may run on its GPUs: init
		// containers (sidecars among them) and ephemeral ones too
		ContainerStatuses          statusList `json:"containerStatuses"`
		InitContainerStatuses      statusList `json:"initContainerStatuses"`
		EphemeralContainerStatuses statusList `json:"ephemeralContainerStatuses"`
	} `json:"status"`
	count *podCount
}

// containerStatus is the part of a container's status that names it.
type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
}

// podCount counts one pod's labels and container statuses as they are
// read, and says what of them it does not keep.
type podCount struct {
	labels, statuses int
	// labelsOver: more than maxPodLabels labels, none kept; statusesOver:
	// more than maxPodStatuses statuses, the first kept
	labelsOver, statusesOver bool
	// dropped: its labels (or statuses) given up to keep the list within
	// maxPodListEntries
	dropped bool
}

// clipped says what of the pod was not kept, "" for nothing.
func (c *podCount) clipped() string {
	var what []string
	if c.labelsOver {
		what = append(what, fmt.Sprintf("more than %d labels: none kept", maxPodLabels))
	}
	if c.statusesOver {
		what = append(what, fmt.Sprintf("more than %d container statuses: the first %d kept", maxPodStatuses, maxPodStatuses))
	}
	if c.dropped {
		what = append(what, fmt.Sprintf("labels (or container statuses) dropped: the node's pods have more than %d in all, this one the most", maxPodListEntries))
	}
	return strings.Join(what, "; ")
}

// podItems decodes the pods one at a time, each within its own bounds,
// and all of them within maxPodListEntries (keptHeap). As encoding/json
// does, a repeated "items" replaces the pods before it (or null drops
// them).
type podItems struct {
	list []podItem
	kept keptHeap
}

func (p *podItems) UnmarshalJSON(data []byte) error {
	p.list, p.kept = nil, keptHeap{items: &p.list}
	return members(data, '[', "items", func(_, val []byte) error {
		it := podItem{count: &podCount{}}
		it.Metadata.Labels.count = it.count
		it.Status.ContainerStatuses.count = it.count
		it.Status.InitContainerStatuses.count = it.count
		it.Status.EphemeralContainerStatuses.count = it.count
		if err := json.Unmarshal(val, &it); err != nil {
			return fmt.Errorf("pod %d: %w", len(p.list)+1, err)
		}
		p.list = append(p.list, it)
		p.kept.add(len(p.list) - 1)
		return nil
	})
}

// entries is what the pod keeps that counts in maxPodListEntries.
func (it *podItem) entries() int {
	st := &it.Status
	return len(it.Metadata.Labels.m) + len(st.ContainerStatuses.list) + len(st.InitContainerStatuses.list) + len(st.EphemeralContainerStatuses.list)
}

// drop gives up the pod's labels, or where it keeps none its container
// statuses.
func (it *podItem) drop() {
	it.count.dropped = true
	if len(it.Metadata.Labels.m) > 0 {
		it.Metadata.Labels.m = nil
		return
	}
	st := &it.Status
	st.ContainerStatuses.list, st.InitContainerStatuses.list, st.EphemeralContainerStatuses.list = nil, nil, nil
}

// keptHeap keeps the pods decoded so far within maxPodListEntries, all
// together: the pods by what they keep, most first.
type keptHeap struct {
	items *[]podItem
	order []int // indices into items, a heap by entries, most first
	total int
}

func (h *keptHeap) Len() int { return len(h.order) }
func (h *keptHeap) Less(i, j int) bool {
	return (*h.items)[h.order[i]].entries() > (*h.items)[h.order[j]].entries()
}
func (h *keptHeap) Swap(i, j int) { h.order[i], h.order[j] = h.order[j], h.order[i] }
func (h *keptHeap) Push(x any)    { h.order = append(h.order, x.(int)) }
func (h *keptHeap) Pop() any {
	x := h.order[len(h.order)-1]
	h.order = h.order[:len(h.order)-1]
	return x
}

// add counts the pod of index i, then drops what the pods keeping the
// most keep until all are within maxPodListEntries.
func (h *keptHeap) add(i int) {
	n := (*h.items)[i].entries()
	if n == 0 {
		return
	}
	h.total += n
	heap.Push(h, i)
	for h.total > maxPodListEntries {
		it := &(*h.items)[h.order[0]]
		before := it.entries()
		it.drop()
		h.total -= before - it.entries()
		if it.entries() == 0 {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
}

// labelMap is a pod's labels, counted as they are read: past maxPodLabels
// none is kept. As encoding/json does with a map, a repeated "labels" adds
// to the labels before it, and null drops them.
type labelMap struct {
	m     map[string]string
	count *podCount
}

func (l *labelMap) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		l.m = nil
		return nil
	}
	if l.m == nil && !l.count.labelsOver {
		l.m = map[string]string{}
	}
	return members(data, '{', "labels", func(key, val []byte) error {
		if l.count.labelsOver {
			return nil
		}
		if l.count.labels++; l.count.labels > maxPodLabels {
			l.count.labelsOver, l.m = true, nil
			return nil
		}
		var k, v string
		if err := json.Unmarshal(key, &k); err != nil {
			return err
		}
		if err := json.Unmarshal(val, &v); err != nil {
			return fmt.Errorf("label %q: %w", k, err)
		}
		l.m[k] = v
		return nil
	})
}

// annotations is the one annotation of a pod that attribution reads,
// mirrorAnnotation's value; the others are passed over. As encoding/json
// does with a map, a repeated "annotations" adds to those before it, and
// null drops them.
type annotations struct{ mirror string }

func (a *annotations) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		a.mirror = ""
		return nil
	}
	return members(data, '{', "annotations", func(key, val []byte) error {
		if string(key) != `"`+mirrorAnnotation+`"` {
			return nil
		}
		if err := json.Unmarshal(val, &a.mirror); err != nil {
			return fmt.Errorf("annotation %s: %w", mirrorAnnotation, err)
		}
		return nil
	})
}

// statusList is a pod's container statuses of one kind, counted with its
// others as they are read: past maxPodStatuses the rest are not kept. As
// encoding/json does with a slice, a repeated key replaces the statuses
// before it.
type statusList struct {
	list  []containerStatus
	count *podCount
}

func (s *statusList) UnmarshalJSON(data []byte) error {
	s.list = nil
	return members(data, '[', "container statuses", func(_, val []byte) error {
		if s.count.statuses >= maxPodStatuses {
			s.count.statusesOver = true
			return nil
		}
		s.count.statuses++
		var cs containerStatus
		if err := json.Unmarshal(val, &cs); err != nil {
			return err
		}
		s.list = append(s.list, cs)
		return nil
	})
}

// members calls f with each member of data, a JSON array (open '[') or
// object ('{') that json.Unmarshal hands an Unmarshaler, so valid JSON:
// for an object its key and value, for an array nil and the element, each
// a slice of data, nothing copied. JSON null has no members; another value
// is an error naming what.
func members(data []byte, open byte, what string, f func(key, val []byte) error) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	if len(data) < 2 || data[0] != open {
		kind := "an array"
		if open == '{' {
			kind = "an object"
		}
		return fmt.Errorf("%s: not %s", what, kind)
	}
	body := data[1 : len(data)-1]
	start, colon := 0, -1
	emit := func(end int) error {
		if len(bytes.TrimSpace(body[start:end])) == 0 {
			return nil // an empty array or object
		}
		if open == '{' {
			return f(bytes.TrimSpace(body[start:colon]), bytes.TrimSpace(body[colon+1:end]))
		}
		return f(nil, bytes.TrimSpace(body[start:end]))
	}
	depth, inString, escaped := 0, false, false
	for i, c := range body {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ':' && depth == 0 && colon < start:
			colon = i
		case c == ',' && depth == 0:
			if err := emit(i); err != nil {
				return err
			}
			start = i + 1
		}
	}
	return emit(len(body))
}

// parsePodList decodes pod metadata: by UID, and container ID -> name. A
// pod of which the bounds kept less than it has (see maxPodListEntries)
// says so in its clipped.
func parsePodList(src string, data []byte) ([]*podMeta, map[string]string, error) {
	var pl podList
	if err := json.Unmarshal(data, &pl); err != nil {
		return nil, nil, fmt.Errorf("pod metadata %s: %w", src, err)
	}
	var out []*podMeta
	cids := map[string]string{}
	for _, it := range pl.Items.list {
		md, st := it.Metadata, it.Status
		n := len(out)
		out = addPod(out, cids, md.Namespace, md.Name, md.UID, md.Annotations.mirror, md.Labels.m,
			slices.Concat(st.ContainerStatuses.list, st.InitContainerStatuses.list, st.EphemeralContainerStatuses.list))
		if len(out) > n {
			out[n].clipped = it.count.clipped()
		}
	}
	return out, cids, nil
}

// addPod adds a decoded pod to out, and its containers' IDs (without the
// runtime's "scheme://") to cids and to the pod's; a pod without a UID or
// name is left out. mirror is its mirrorAnnotation, taken where it is a
// static pod's UID (poduid.Static).
func addPod(out []*podMeta, cids map[string]string, ns, name, uid, mirror string, labels map[string]string, statuses []containerStatus) []*podMeta {
	if uid == "" || name == "" {
		return out
	}
	pm := &podMeta{Namespace: ns, Name: name, UID: strings.ToLower(uid), Labels: labels}
	if poduid.Static(mirror) {
		pm.mirrorOf = strings.ToLower(mirror)
	}
	for _, cs := range statuses {
		id := cs.ContainerID
		if i := strings.LastIndex(id, "://"); i >= 0 {
			id = id[i+3:]
		}
		if id != "" {
			cids[strings.ToLower(id)] = cs.Name
			pm.ContainerIDs = append(pm.ContainerIDs, strings.ToLower(id))
		}
	}
	return append(out, pm)
}
