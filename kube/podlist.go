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

// podItems decodes the pods one at a time, sharing one entryBudget.
type podItems struct{ list []podItem }

func (p *podItems) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := openDelim(dec, '[', "items"); err != nil {
		return err
	}
	b := &entryBudget{left: maxPodListEntries}
	for dec.More() {
		var it podItem
		it.Metadata.Labels.budget = b
		it.Status.ContainerStatuses.budget = b
		it.Status.InitContainerStatuses.budget = b
		it.Status.EphemeralContainerStatuses.budget = b
		if err := dec.Decode(&it); err != nil {
			return fmt.Errorf("pod %d: %w", len(p.list)+1, err)
		}
		p.list = append(p.list, it)
	}
	return nil
}

// labelMap is a pod's labels, each taken from the budget as it is read.
type labelMap struct {
	m      map[string]string
	budget *entryBudget
}

func (l *labelMap) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := openDelim(dec, '{', "labels"); err != nil {
		return err
	}
	l.m = map[string]string{}
	for dec.More() {
		if err := l.budget.take(); err != nil {
			return err
		}
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("label %q: %w", k, err)
		}
		l.m[k.(string)] = v // a valid object's keys are strings
	}
	return nil
}

// statusList is a pod's container statuses of one kind, each taken from
// the budget as it is read.
type statusList struct {
	list   []containerStatus
	budget *entryBudget
}

func (s *statusList) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := openDelim(dec, '[', "container statuses"); err != nil {
		return err
	}
	for dec.More() {
		if err := s.budget.take(); err != nil {
			return err
		}
		var cs containerStatus
		if err := dec.Decode(&cs); err != nil {
			return err
		}
		s.list = append(s.list, cs)
	}
	return nil
}

// openDelim reads the token that opens what (an array or object).
func openDelim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		kind := "an array"
		if want == '{' {
			kind = "an object"
		}
		return fmt.Errorf("%s: not %s", what, kind)
	}
	return nil
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
		md := it.Metadata
		if md.UID == "" || md.Name == "" {
			continue
		}
		out = append(out, &podMeta{Namespace: md.Namespace, Name: md.Name, UID: strings.ToLower(md.UID), Labels: md.Labels.m})
		st := it.Status
		for _, cs := range slices.Concat(st.ContainerStatuses.list, st.InitContainerStatuses.list, st.EphemeralContainerStatuses.list) {
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
