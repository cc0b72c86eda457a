package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxPodListEntries bounds the labels and container statuses of a pod
// list, all its pods together: each costs a hundred bytes or more decoded
// from a dozen, so a list of 60 MiB of labels (4 million) took a minute
// of CPU and 480 MiB of heap at every refresh. A node's pods have a few
// thousand (110 pods of 20 labels and 3 containers each: 2,500).
const maxPodListEntries = 100_000

// errTooManyEntries refuses a pod list past maxPodListEntries.
var errTooManyEntries = fmt.Errorf("more than %d labels and container statuses, all pods together", maxPodListEntries)

// podList is the part of a Kubernetes PodList (as served by the kubelet's
// /pods endpoint or `kubectl get pods -o json`) that attribution needs.
type podList struct {
	Items podItems `json:"items"`
}

// podItem is the part of one pod that attribution needs.
type podItem struct {
	Metadata struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace"`
		UID       string   `json:"uid"`
		Labels    labelMap `json:"labels"`
	} `json:"metadata"`
	Status struct {
		// every container of the pod may run on its GPUs: init
		// containers (sidecars among them) and ephemeral ones too
		ContainerStatuses          statusList `json:"containerStatuses"`
		InitContainerStatuses      statusList `json:"initContainerStatuses"`
		EphemeralContainerStatuses statusList `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

// containerStatus is the part of a container's status that names it.
type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
}

// entryBudget counts down the labels and container statuses a pod list
// may still hold.
type entryBudget struct{ left int }

func (b *entryBudget) take() error {
	if b == nil {
		return nil
	}
	if b.left--; b.left < 0 {
		return errTooManyEntries
	}
	return nil
}

// podItems decodes the pods one at a time, sharing one entryBudget. As
// encoding/json does, a repeated "items" replaces the pods before it (or
// null drops them), but its entries count with theirs: the budget is the
// whole list's, not each "items"'s.
type podItems struct {
	list   []podItem
	budget *entryBudget
}

func (p *podItems) UnmarshalJSON(data []byte) error {
	if p.budget == nil {
		p.budget = &entryBudget{left: maxPodListEntries}
	}
	b := p.budget
	p.list = nil
	return members(data, '[', "items", func(_, val []byte) error {
		var it podItem
		it.Metadata.Labels.budget = b
		it.Status.ContainerStatuses.budget = b
		it.Status.InitContainerStatuses.budget = b
		it.Status.EphemeralContainerStatuses.budget = b
		if err := json.Unmarshal(val, &it); err != nil {
			return fmt.Errorf("pod %d: %w", len(p.list)+1, err)
		}
		p.list = append(p.list, it)
		return nil
	})
}

// labelMap is a pod's labels, each taken from the budget as it is read.
// As encoding/json does with a map, a repeated "labels" adds to the labels
// before it, and null drops them.
type labelMap struct {
	m      map[string]string
	budget *entryBudget
}

func (l *labelMap) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		l.m = nil
		return nil
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	return members(data, '{', "labels", func(key, val []byte) error {
		if err := l.budget.take(); err != nil {
			return err
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

// statusList is a pod's container statuses of one kind, each taken from
// the budget as it is read. As encoding/json does with a slice, a repeated
// key replaces the statuses before it.
type statusList struct {
	list   []containerStatus
	budget *entryBudget
}

func (s *statusList) UnmarshalJSON(data []byte) error {
	s.list = nil
	return members(data, '[', "container statuses", func(_, val []byte) error {
		if err := s.budget.take(); err != nil {
			return err
		}
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

// parsePodList decodes pod metadata: by UID, and container ID -> name.
func parsePodList(src string, data []byte) ([]*podMeta, map[string]string, error) {
	var pl podList
	if err := json.Unmarshal(data, &pl); err != nil {
		if errors.Is(err, errTooManyEntries) {
			err = errTooManyEntries // without the pod it stopped at
		}
		return nil, nil, fmt.Errorf("pod metadata %s: %w", src, err)
	}
	var out []*podMeta
	cids := map[string]string{}
	for _, it := range pl.Items.list {
		md, st := it.Metadata, it.Status
		out = addPod(out, cids, md.Namespace, md.Name, md.UID, md.Labels.m,
			slices.Concat(st.ContainerStatuses.list, st.InitContainerStatuses.list, st.EphemeralContainerStatuses.list))
	}
	return out, cids, nil
}

// addPod adds a decoded pod to out, and its containers' IDs (without the
// runtime's "scheme://") to cids and to the pod's; a pod without a UID or name is left out.
func addPod(out []*podMeta, cids map[string]string, ns, name, uid string, labels map[string]string, statuses []containerStatus) []*podMeta {
	if uid == "" || name == "" {
		return out
	}
	pm := &podMeta{Namespace: ns, Name: name, UID: strings.ToLower(uid), Labels: labels}
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
