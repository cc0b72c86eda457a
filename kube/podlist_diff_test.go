package kube

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// plainPodList is the shape of podList decoded by encoding/json alone, as
// it was before the pods were decoded in place: the reference that
// parsePodList must agree with on every input below its entries limit.
// Pods and statuses are decoded each into a fresh value: encoding/json
// decodes a repeated key's array into the elements the first one left,
// keeping their fields the second does not name, a quirk the reference
// does not hold the decoder to.
type plainPodList struct {
	Items []json.RawMessage `json:"items"`
}

type plainPodItem struct {
	Metadata struct {
		Name        string                     `json:"name"`
		Namespace   string                     `json:"namespace"`
		UID         string                     `json:"uid"`
		Labels      map[string]string          `json:"labels"`
		Annotations map[string]json.RawMessage `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		ContainerStatuses          []json.RawMessage `json:"containerStatuses"`
		InitContainerStatuses      []json.RawMessage `json:"initContainerStatuses"`
		EphemeralContainerStatuses []json.RawMessage `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

func plainParsePodList(data []byte) ([]*podMeta, map[string]string, error) {
	var pl plainPodList
	if err := json.Unmarshal(data, &pl); err != nil {
		return nil, nil, err
	}
	var out []*podMeta
	cids := map[string]string{}
	for _, raw := range pl.Items {
		var it plainPodItem
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, nil, err
		}
		md := it.Metadata
		st := it.Status
		var statuses []containerStatus
		for _, raw := range slices.Concat(st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses) {
			var cs containerStatus
			if err := json.Unmarshal(raw, &cs); err != nil {
				return nil, nil, err
			}
			statuses = append(statuses, cs)
		}
		var mirror string
		if raw, ok := md.Annotations[mirrorAnnotation]; ok {
			if err := json.Unmarshal(raw, &mirror); err != nil {
				return nil, nil, err
			}
		}
		out = addPod(out, cids, md.Namespace, md.Name, md.UID, mirror, md.Labels, statuses)
	}
	return out, cids, nil
}

// checkPodListLikePlain fails where parsePodList and plain encoding/json
// disagree on data: one refusing what the other takes, or a pod, label or
// container seen differently.
func checkPodListLikePlain(t *testing.T, data []byte) {
	t.Helper()
	metas, cids, err := parsePodList("f.json", data)
	if slices.ContainsFunc(metas, func(p *podMeta) bool { return p.clipped != "" }) {
		return // cut by the bounds, as plain encoding/json does not
	}
	wantMetas, wantCids, wantErr := plainParsePodList(data)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", data, err, wantErr)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(metas, wantMetas) || !reflect.DeepEqual(cids, wantCids) {
		t.Fatalf("%q:\n pods %s containers %v\nencoding/json's:\n pods %s containers %v", data, dumpMetas(metas), cids, dumpMetas(wantMetas), wantCids)
	}
}

func dumpMetas(ms []*podMeta) string {
	b, _ := json.Marshal(ms)
	return string(b)
}

// Whatever a kubelet or metadata URL serves, the pods, labels and
// containers decoded in place are those encoding/json decodes into the
// same shape, and an input one refuses the other refuses.
func FuzzPodListLikePlain(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"metadata":{"name":"a","namespace":"n","uid":"U","labels":{"x":"y"}},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://ab"}]}}]}`,
		`{"items":null}`,
		`{"items":[]}`,
		` { "items" : [ { "metadata" : { "name" : "a" , "uid" : "u" , "labels" : { } } } , null ] } `,
		`{"items":[{"metadata":{"name":"a\"],}","uid":"u\\","labels":{"k\\\"":"v,]}:\"","[":"{"}},"spec":{"x":[[1,{"a":[]}],"]"]}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","labels":{"a":"1","a":"2"}}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","labels":{"a":"1"},"labels":{"b":"2"}}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","labels":{"a":"1"},"labels":null}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u"},"status":{"containerStatuses":[{"name":"c","containerID":"x://1"}],"containerStatuses":[{"name":"d","containerID":"x://2"}]}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u"}}],"items":[{"metadata":{"name":"b","uid":"v"}}]}`,
		`{"Items":[{"METADATA":{"Name":"a","UID":"u","LABELS":{"\u0061":"\ud800"}}}]}`,
		`{"items":[{"metadata":{"labels":[1]}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","labels":{"a":1}}}]}`,
		`{"items":{}}`,
		`{"items":[1]}`,
		`{"items":[{"status":{"containerStatuses":{}}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","annotations":{"kubernetes.io/config.mirror":"0123456789abcdef0123456789ABCDEF","x":1}}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","annotations":{"kubernetes.io/config.mirror":"0123456789abcdef0123456789abcdef"},"annotations":null}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","annotations":{"kubernetes.io/config.mirror":1}}}]}`,
		`{"items":[{"metadata":{"name":"a","uid":"u","annotations":{"kubernetes.io/config.mirror":"0123"},"Annotations":{"y":"z"}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkPodListLikePlain)
}
