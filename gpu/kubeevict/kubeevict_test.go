package kubeevict

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// apiServer is a fake API server's pods and their Eviction endpoint: it
// answers each pod's eviction with the status in codes (201 when absent)
// and its GET as pods says (a ReplicaSet's pod of UID uidMeant when
// absent), and records the requests.
type apiServer struct {
	mu    sync.Mutex
	codes map[string]int       // "namespace/name" -> HTTP status
	pods  map[string]podAnswer // "namespace/name" -> the GET's answer
	got   []request            // the evictions
	reads []string             // the paths read (GET)
}

// podAnswer is a fake API server's answer to a pod's GET.
type podAnswer struct {
	code        int               // 0: 200, the pod
	uid         string            // "": uidMeant
	owners      []map[string]any  // nil: a ReplicaSet, its controller
	annotations map[string]string // the pod's
	body        string            // where set, the whole answer
}

// servePod answers the GET of the pod ns/name.
func (a *apiServer) servePod(w http.ResponseWriter, ns, name string) {
	ans := a.pods[ns+"/"+name]
	switch {
	case ans.code == http.StatusNotFound:
		w.WriteHeader(ans.code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "status": "Failure", "code": ans.code, "reason": "NotFound",
			"message": `pods "` + name + `" not found`, "details": map[string]string{"name": name, "kind": "pods"}})
		return
	case ans.code != 0:
		w.WriteHeader(ans.code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "code": ans.code, "message": `pods "` + name + `" is forbidden: cannot get resource "pods"`})
		return
	case ans.body != "":
		_, _ = io.WriteString(w, ans.body)
		return
	}
	owners := ans.owners
	if owners == nil {
		owners = []map[string]any{{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "train-5d8f", "controller": true}}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{
		"namespace": ns, "name": name, "uid": cmp.Or(ans.uid, uidMeant), "ownerReferences": owners, "annotations": ans.annotations}})
}

type request struct {
	method, path, auth string
	body               eviction
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Method == http.MethodGet {
		a.reads = append(a.reads, r.URL.Path)
		parts := strings.Split(r.URL.Path, "/") // /api/v1/namespaces/NS/pods/NAME
		if len(parts) != 7 || parts[5] != "pods" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		a.servePod(w, parts[4], parts[6])
		return
	}
	var ev eviction
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &ev)
	a.got = append(a.got, request{r.Method, r.URL.Path, r.Header.Get("Authorization"), ev})
	code := a.codes[ev.Metadata.Namespace+"/"+ev.Metadata.Name]
	switch code {
	case 0:
		code = http.StatusCreated
	case http.StatusNotFound: // the API server's answer for a pod that is gone
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "status": "Failure", "code": code, "reason": "NotFound",
			"message": `pods "` + ev.Metadata.Name + `" not found`, "details": map[string]string{"name": ev.Metadata.Name, "kind": "pods"}})
		return
	case notFoundElse: // a 404 that is not the API server's about the pod
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "404 page not found\n")
		return
	}
	if code == conflictElse { // a budget's update conflict, not the pod's precondition
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "status": "Failure", "code": http.StatusConflict, "reason": "Conflict",
			"message": `Operation cannot be fulfilled on poddisruptionbudgets.policy "train": the object has been modified; please apply your changes to the latest version and try again`,
			"details": map[string]string{"name": "train", "group": "policy", "kind": "poddisruptionbudgets"}})
		return
	}
	if code == http.StatusConflict { // the pod's UID precondition refused, as the eviction answers it
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "status": "Failure", "code": code, "reason": "Conflict",
			"message": `Operation cannot be fulfilled on Pod "` + ev.Metadata.Name + `": the UID in the precondition (` + uidMeant +
				`) does not match the UID in record (9e5c8d1a-0000-4000-8000-000000000001). The object might have been deleted and then recreated`,
			"details": map[string]string{"name": ev.Metadata.Name, "kind": "Pod"}})
		return
	}
	if code == conflictOfStorage { // the same, as storage's precondition answers it
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "status": "Failure", "code": http.StatusConflict, "reason": "Conflict",
			"message": `Operation cannot be fulfilled on pods "` + ev.Metadata.Name + `": StorageError: invalid object, Code: 4, AdditionalErrorMsg: Precondition failed: UID in precondition: ` + uidMeant + `, UID in object meta: 9e5c8d1a-0000-4000-8000-000000000001`,
			"details": map[string]string{"name": ev.Metadata.Name, "kind": "pods"}})
		return
	}
	w.WriteHeader(code)
	msg := map[int]string{
		http.StatusTooManyRequests: "Cannot evict pod as it would violate the pod's disruption budget.",
		http.StatusForbidden:       `pods "p" is forbidden: cannot create resource "pods/eviction"`,
	}[code]
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "code": code, "message": msg})
}

// uidMeant is the UID of the pod a plan's process runs in, uidOther
// another pod's.
const (
	uidMeant = "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
	uidOther = "9e5c8d1a-0000-4000-8000-000000000001"
)

// notFoundElse, in apiServer.codes, answers a 404 that is not the API
// server's Status of the pod (a proxy's, a wrong path's).
const notFoundElse = -404

// conflictElse, in apiServer.codes, answers a 409 that is not the pod's
// precondition (a PodDisruptionBudget's update conflict).
const conflictElse = -409

// conflictOfStorage, in apiServer.codes, answers the pod's UID
// precondition refused as storage words it (the eviction's own check
// names the kind "Pod", storage "pods").
const conflictOfStorage = -4090

func move(tenant, ns, name string) gpu.Move {
	return gpu.Move{Tenant: tenant, FromUUID: "GPU-a", ToUUID: "GPU-b", Pod: &gpu.Pod{Namespace: ns, Name: name}}
}

func TestRebalance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		plan     gpu.Plan
		codes    map[string]int
		paths    []string // the eviction requests sent, in order
		dryRun   bool
		errHas   []string // in the error; none: no error
		budget   bool     // the error is ErrBudget
		refused  bool     // the error is gpu.ErrBusy: every eviction refused by a budget
		applied  []int    // the moves a *gpu.PartialError says were made; none: no PartialError
		noToken  bool
		rotateTo string   // the token file's content before a second run
		uids     []string // each eviction's precondition UID (none: uidMeant, the UID read)
		pods     map[string]podAnswer
		reads    []string // the pods read, in order (nil: those of paths)
		unmoved  bool     // the error is ErrNotMovable
	}{
		{name: "evicted", plan: gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"}},
		{name: "dry run", plan: gpu.Plan{DryRun: true, Moves: []gpu.Move{move("train", "ml", "train-0")}},
			paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"}, dryRun: true},
		{name: "budget refuses, reported once", plan: gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			codes: map[string]int{"ml/train-0": 429}, paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"},
			errHas: []string{"eviction of ml/train-0 (tenant train)", "PodDisruptionBudget", "429", "disruption budget"}, budget: true, refused: true},
		{name: "budgets refuse every eviction", plan: gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			codes: map[string]int{"x/a-0": 429, "y/b-0": 429}, paths: []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction"},
			errHas: []string{"eviction of x/a-0", "eviction of y/b-0"}, budget: true, refused: true},
		{name: "one refused by a budget, one forbidden: failed", plan: gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			codes: map[string]int{"x/a-0": 429, "y/b-0": 403}, paths: []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction"},
			errHas: []string{"eviction of x/a-0", "403"}, budget: true},
		{name: "evicted, refused by a budget, evicted: applied in part",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0"), move("c", "z", "c-0")}},
			codes:  map[string]int{"y/b-0": 429},
			paths:  []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction", "/api/v1/namespaces/z/pods/c-0/eviction"},
			errHas: []string{"eviction of y/b-0", "429"}, budget: true, applied: []int{0, 2}},
		{name: "refused by a budget, evicted: applied in part, not refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			codes:  map[string]int{"x/a-0": 429, "y/b-0": 201},
			paths:  []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction"},
			errHas: []string{"eviction of x/a-0"}, budget: true, applied: []int{1}},
		{name: "forbidden", plan: gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			codes: map[string]int{"ml/train-0": 403}, paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"},
			errHas: []string{"eviction of ml/train-0", "403", `"pods/eviction"`}},
		{name: "one refused, the next still evicted",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			codes:  map[string]int{"x/a-0": 429},
			paths:  []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction"},
			errHas: []string{"eviction of x/a-0"}, budget: true, applied: []int{1}},
		{name: "the UID read is each eviction's precondition, the move's or where it names none",
			plan:  gpu.Plan{Moves: []gpu.Move{{Tenant: "train", Pod: &gpu.Pod{Namespace: "ml", Name: "train-0", UID: uidMeant}}, move("b", "y", "b-0")}},
			pods:  map[string]podAnswer{"y/b-0": {uid: uidOther}},
			paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction"}, uids: []string{uidMeant, uidOther}},
		{name: "the pod read is not the move's (UID): not evicted, failed",
			plan:   gpu.Plan{Moves: []gpu.Move{{Tenant: "train", Pod: &gpu.Pod{Namespace: "ml", Name: "train-0", UID: uidMeant}}}},
			pods:   map[string]podAnswer{"ml/train-0": {uid: uidOther}},
			reads:  []string{"/api/v1/namespaces/ml/pods/train-0"},
			errHas: []string{"eviction of ml/train-0 (tenant train): the pod ml/train-0 is not the one planned (UID " + uidMeant + ", the API server's " + uidOther + ")", "not evicted"}},
		{name: "a bare pod is not evicted: refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			pods:   map[string]podAnswer{"ml/train-0": {owners: []map[string]any{}}},
			reads:  []string{"/api/v1/namespaces/ml/pods/train-0"},
			errHas: []string{"eviction of ml/train-0 (tenant train): not evicted", "no controller owns it", "deleted for good"}, refused: true, unmoved: true},
		{name: "an owner that is not its controller: refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			pods:   map[string]podAnswer{"ml/train-0": {owners: []map[string]any{{"kind": "ConfigMap", "name": "c"}, {"kind": "ReplicaSet", "name": "r", "controller": false}}}},
			reads:  []string{"/api/v1/namespaces/ml/pods/train-0"},
			errHas: []string{"eviction of ml/train-0 (tenant train)", "no controller owns it"}, refused: true, unmoved: true},
		{name: "a DaemonSet's pod is not evicted: refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("agent", "ops", "agent-x7")}},
			pods:   map[string]podAnswer{"ops/agent-x7": {owners: []map[string]any{{"kind": "DaemonSet", "name": "agent", "controller": true}}}},
			reads:  []string{"/api/v1/namespaces/ops/pods/agent-x7"},
			errHas: []string{"eviction of ops/agent-x7 (tenant agent)", "the DaemonSet agent, which makes it again on the same node"}, refused: true, unmoved: true},
		{name: "a mirror pod (annotation) is not evicted: refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("etcd", "kube-system", "etcd-node0")}},
			pods:   map[string]podAnswer{"kube-system/etcd-node0": {annotations: map[string]string{"kubernetes.io/config.mirror": "0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5"}}},
			reads:  []string{"/api/v1/namespaces/kube-system/pods/etcd-node0"},
			errHas: []string{"eviction of kube-system/etcd-node0 (tenant etcd)", "a static pod's mirror (annotation kubernetes.io/config.mirror)"}, refused: true, unmoved: true},
		{name: "a mirror pod (the Node its controller) is not evicted: refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("etcd", "kube-system", "etcd-node0")}},
			pods:   map[string]podAnswer{"kube-system/etcd-node0": {owners: []map[string]any{{"kind": "Node", "name": "node0", "controller": true}}}},
			reads:  []string{"/api/v1/namespaces/kube-system/pods/etcd-node0"},
			errHas: []string{"eviction of kube-system/etcd-node0 (tenant etcd)", "the Node node0"}, refused: true, unmoved: true},
		{name: "a bare pod refused, the next evicted: applied in part",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			pods:   map[string]podAnswer{"x/a-0": {owners: []map[string]any{}}},
			paths:  []string{"/api/v1/namespaces/y/pods/b-0/eviction"},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0", "/api/v1/namespaces/y/pods/b-0"},
			errHas: []string{"eviction of x/a-0 (tenant a)", "no controller owns it"}, unmoved: true, applied: []int{1}},
		{name: "a bare pod and a budget's refusal: refused",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			pods:   map[string]podAnswer{"x/a-0": {owners: []map[string]any{}}},
			codes:  map[string]int{"y/b-0": 429},
			paths:  []string{"/api/v1/namespaces/y/pods/b-0/eviction"},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0", "/api/v1/namespaces/y/pods/b-0"},
			errHas: []string{"eviction of x/a-0 (tenant a)", "eviction of y/b-0", "429"}, unmoved: true, budget: true, refused: true},
		{name: "a pod the read finds gone counts as moved, no eviction sent",
			plan:  gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			pods:  map[string]podAnswer{"x/a-0": {code: http.StatusNotFound}},
			reads: []string{"/api/v1/namespaces/x/pods/a-0"}},
		{name: "a read forbidden fails",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			pods:   map[string]podAnswer{"x/a-0": {code: http.StatusForbidden}},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0"},
			errHas: []string{"eviction of x/a-0 (tenant a): reading the pod: HTTP 403 Forbidden", `cannot get resource "pods"`}},
		{name: "a read throttled is refused for now",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			pods:   map[string]podAnswer{"x/a-0": {code: http.StatusTooManyRequests}},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0"},
			errHas: []string{"eviction of x/a-0 (tenant a): reading the pod", "429"}, budget: true, refused: true},
		{name: "a read answered with another pod fails",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			pods:   map[string]podAnswer{"x/a-0": {body: `{"kind":"Pod","metadata":{"namespace":"x","name":"b-0","uid":"` + uidMeant + `"}}`}},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0"},
			errHas: []string{"eviction of x/a-0 (tenant a): reading the pod: HTTP 200 OK: the answer is not the pod (it names x/b-0"}},
		{name: "a read answered with no pod fails",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			pods:   map[string]podAnswer{"x/a-0": {body: "<html>sign in</html>"}},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0"},
			errHas: []string{"eviction of x/a-0 (tenant a): reading the pod: HTTP 200 OK: not a pod"}},
		{name: "a read's answer over the bound fails",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			pods:   map[string]podAnswer{"x/a-0": {body: `{"metadata":{"namespace":"x","name":"a-0","uid":"` + uidMeant + `","ownerReferences":[{"kind":"ReplicaSet","name":"r","controller":true}]},"pad":"` + strings.Repeat("x", maxPodBytes) + `"}`}},
			reads:  []string{"/api/v1/namespaces/x/pods/a-0"},
			errHas: []string{"eviction of x/a-0 (tenant a): reading the pod: HTTP 200 OK: an answer over 2097152 bytes"}},
		{name: "a pod of the name made since is not evicted: failed",
			plan:  gpu.Plan{Moves: []gpu.Move{{Tenant: "train", Pod: &gpu.Pod{Namespace: "ml", Name: "train-0", UID: uidMeant}}}},
			codes: map[string]int{"ml/train-0": http.StatusConflict},
			paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"}, uids: []string{uidMeant},
			errHas: []string{"eviction of ml/train-0 (tenant train)", "409", "not the one planned (UID " + uidMeant + ")", "made since, or the planned process is another pod's; not evicted", "does not match the UID in record"}},
		{name: "a pod of the name made since, storage's wording: failed",
			plan:  gpu.Plan{Moves: []gpu.Move{{Tenant: "train", Pod: &gpu.Pod{Namespace: "ml", Name: "train-0", UID: uidMeant}}}},
			codes: map[string]int{"ml/train-0": conflictOfStorage},
			paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"}, uids: []string{uidMeant},
			errHas: []string{"eviction of ml/train-0 (tenant train)", "409", "not the one planned (UID " + uidMeant + ")", "Precondition failed"}},
		{name: "another conflict is not read as a pod made since",
			plan:  gpu.Plan{Moves: []gpu.Move{{Tenant: "train", Pod: &gpu.Pod{Namespace: "ml", Name: "train-0", UID: uidMeant}}}},
			codes: map[string]int{"ml/train-0": conflictElse},
			paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"}, uids: []string{uidMeant},
			errHas: []string{"eviction of ml/train-0 (tenant train)", "HTTP 409 Conflict: Operation cannot be fulfilled on poddisruptionbudgets"}},
		{name: "a static pod is not sent an eviction",
			plan:   gpu.Plan{Moves: []gpu.Move{{Tenant: "etcd", Pod: &gpu.Pod{Namespace: "kube-system", Name: "etcd-node0", UID: "0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5"}}, move("b", "y", "b-0")}},
			paths:  []string{"/api/v1/namespaces/y/pods/b-0/eviction"},
			errHas: []string{"eviction of kube-system/etcd-node0 (tenant etcd): not evicted", "a static pod (UID 0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5"}, unmoved: true, applied: []int{1}},
		{name: "a pod gone already counts as moved", plan: gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			codes: map[string]int{"ml/train-0": 404}, paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"}},
		{name: "gone, refused by a budget: applied in part",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), move("b", "y", "b-0")}},
			codes:  map[string]int{"x/a-0": 404, "y/b-0": 429},
			paths:  []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/y/pods/b-0/eviction"},
			errHas: []string{"eviction of y/b-0", "429"}, budget: true, applied: []int{0}},
		{name: "a 404 not of the pod fails", plan: gpu.Plan{Moves: []gpu.Move{move("train", "ml", "train-0")}},
			codes: map[string]int{"ml/train-0": notFoundElse}, paths: []string{"/api/v1/namespaces/ml/pods/train-0/eviction"},
			errHas: []string{"eviction of ml/train-0", "HTTP 404 Not Found: 404 page not found"}},
		{name: "MIG layout refused before any eviction",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}, MIG: []gpu.MIGLayoutPlan{{UUID: "GPU-a", Profiles: []string{"1g.10gb"}}}},
			errHas: []string{"MIG manager"}},
		{name: "a move without a pod refused before any eviction",
			plan:   gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0"), {Tenant: "b", PID: 42, ToUUID: "GPU-b"}}},
			errHas: []string{`move 2 (tenant "b") names no pod`}},
		{name: "invalid pod name", plan: gpu.Plan{Moves: []gpu.Move{move("a", "x", "../a")}},
			errHas: []string{"not a valid Kubernetes name"}},
		{name: "no token", plan: gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}}, noToken: true,
			errHas: []string{"bearer token"}},
		{name: "a rotated token is read again", plan: gpu.Plan{Moves: []gpu.Move{move("a", "x", "a-0")}},
			paths: []string{"/api/v1/namespaces/x/pods/a-0/eviction", "/api/v1/namespaces/x/pods/a-0/eviction"}, rotateTo: "tok2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &apiServer{codes: tc.codes, pods: tc.pods}
			srv := httptest.NewTLSServer(api)
			defer srv.Close()
			tokenFile := filepath.Join(t.TempDir(), "token")
			if !tc.noToken {
				if err := os.WriteFile(tokenFile, []byte("tok1\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			e, err := New(Options{APIServer: srv.URL, TokenFile: tokenFile, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			err = e.Rebalance(context.Background(), tc.plan)
			tokens := []string{"Bearer tok1"}
			if tc.rotateTo != "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(tokenFile, []byte(tc.rotateTo), 0o600); err != nil {
					t.Fatal(err)
				}
				err = e.Rebalance(context.Background(), tc.plan)
				tokens = append(tokens, "Bearer "+tc.rotateTo)
			}
			switch {
			case len(tc.errHas) == 0 && err != nil:
				t.Fatalf("error %v", err)
			case len(tc.errHas) > 0 && err == nil:
				t.Fatalf("no error, want one with %q", tc.errHas)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if errors.Is(err, ErrBudget) != tc.budget {
				t.Errorf("error %v: errors.Is(ErrBudget) %v, want %v", err, errors.Is(err, ErrBudget), tc.budget)
			}
			if errors.Is(err, gpu.ErrBusy) != tc.refused {
				t.Errorf("error %v: errors.Is(gpu.ErrBusy) %v, want %v", err, errors.Is(err, gpu.ErrBusy), tc.refused)
			}
			if errors.Is(err, ErrNotMovable) != tc.unmoved {
				t.Errorf("error %v: errors.Is(ErrNotMovable) %v, want %v", err, errors.Is(err, ErrNotMovable), tc.unmoved)
			}
			reads := tc.reads
			if reads == nil {
				for _, p := range tc.paths {
					reads = append(reads, strings.TrimSuffix(p, "/eviction"))
				}
			}
			if !slices.Equal(api.reads, reads) {
				t.Errorf("pods read %q, want %q", api.reads, reads)
			}
			var partial *gpu.PartialError
			if errors.As(err, &partial) != (tc.applied != nil) || partial != nil && !slices.Equal(partial.Applied, tc.applied) {
				t.Errorf("error %v: PartialError %+v, want one with the moves %v applied", err, partial, tc.applied)
			}
			if len(api.got) != len(tc.paths) {
				t.Fatalf("%d requests %+v, want %d", len(api.got), api.got, len(tc.paths))
			}
			for i, r := range api.got {
				if r.method != http.MethodPost || r.path != tc.paths[i] {
					t.Errorf("request %d: %s %s, want POST %s", i, r.method, r.path, tc.paths[i])
				}
				if want := tokens[min(i, len(tokens)-1)]; r.auth != want {
					t.Errorf("request %d: Authorization %q, want %q", i, r.auth, want)
				}
				if r.body.APIVersion != "policy/v1" || r.body.Kind != "Eviction" || !strings.HasSuffix(tc.paths[i], "/"+r.body.Metadata.Name+"/eviction") {
					t.Errorf("request %d: body %+v", i, r.body)
				}
				if dry := r.body.DeleteOptions != nil && len(r.body.DeleteOptions.DryRun) == 1 && r.body.DeleteOptions.DryRun[0] == "All"; dry != tc.dryRun {
					t.Errorf("request %d: dryRun=All %v, want %v", i, dry, tc.dryRun)
				}
				uid := ""
				if r.body.DeleteOptions != nil && r.body.DeleteOptions.Preconditions != nil {
					uid = r.body.DeleteOptions.Preconditions.UID
				}
				want := uidMeant
				if i < len(tc.uids) {
					want = tc.uids[i]
				}
				if uid != want {
					t.Errorf("request %d: precondition UID %q, want %q", i, uid, want)
				}
			}
		})
	}
}

func TestNew(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		opts   Options
		errHas string
	}{
		{"http", Options{APIServer: "http://api:6443", TokenFile: "t", HTTPClient: http.DefaultClient}, "not an https://HOST[:PORT] URL"},
		{"path", Options{APIServer: "https://api:6443/api", TokenFile: "t", HTTPClient: http.DefaultClient}, "not an https://HOST[:PORT] URL"},
		{"no token file", Options{APIServer: DefaultAPIServer, HTTPClient: http.DefaultClient}, "no bearer token file"},
		{"no CA", Options{APIServer: DefaultAPIServer, TokenFile: "t"}, "no CA file"},
		{"bad CA", Options{APIServer: DefaultAPIServer, TokenFile: "t", CAFile: ca}, "no PEM certificate"},
		{"trailing slash", Options{APIServer: "https://api:6443/", TokenFile: "t", HTTPClient: http.DefaultClient}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if tc.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %v, want one with %q", err, tc.errHas)
			}
		})
	}
}

func TestMoveProcessNamesNoPod(t *testing.T) {
	e, err := New(Options{APIServer: DefaultAPIServer, TokenFile: "t", HTTPClient: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.MoveProcess(context.Background(), 42, "GPU-b"); err == nil || !strings.Contains(err.Error(), "names no pod") {
		t.Fatalf("error %v", err)
	}
}

// An answer's message is cut after 256 bytes, at a rune's start, saying
// how much was left out, whether it is a Status's message or the body
// itself; a control character is escaped.
func TestStatusMessage(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	for _, c := range []struct{ body, want string }{
		{`{"kind":"Status","message":"Cannot evict pod as it would violate the pod's disruption budget."}`, "Cannot evict pod as it would violate the pod's disruption budget."},
		{`{"kind":"Status","message":"` + long + `"}`, strings.Repeat("é", 128) + "... (144 more bytes)"},
		{"  plain text  ", "plain text"},
		{"a" + long, "a" + strings.Repeat("é", 128) + "... (144 more bytes)"},
		{`{"message":"line one\nline two\u001b[31m"}`, `line one\nline two\x1b[31m`},
	} {
		if _, got := readStatus(strings.NewReader(c.body)); got != c.want {
			t.Errorf("%.40q: %q, want %q", c.body, got, c.want)
		}
	}
}

// An API server's answer, whatever it holds, gives a message that is
// valid UTF-8, has no control character (an escape sequence would reach
// the log and the terminal reading it) and stays within maxMessage and its
// cut's note.
func FuzzStatusMessage(f *testing.F) {
	for _, s := range []string{
		`{"kind":"Status","message":"Cannot evict pod as it would violate the pod's disruption budget."}`,
		`{"message":"line one\nline two\u001b[31m"}`,
		"  plain text  ", "\xff\xfe{", `{"message":` + strings.Repeat(`"é`, 300) + `"}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, got := readStatus(bytes.NewReader(body))
		if !utf8.ValidString(got) {
			t.Fatalf("%q: not valid UTF-8", got)
		}
		if i := strings.IndexFunc(got, unicode.IsControl); i >= 0 {
			t.Fatalf("%q: a control character at %d", got, i)
		}
		if len(got) > maxMessage+64 {
			t.Fatalf("%d bytes, over %d and the cut's note", len(got), maxMessage)
		}
	})
}
