package rebalance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command"
	"github.com/vgpu-exporter/vgpu_exporter/internal/command/commandtest"
)

var podMove = gpu.Move{Tenant: "llm-a", FromUUID: "GPU-0", ToUUID: "GPU-1", Pod: &gpu.Pod{Namespace: "serving", Name: "llm-a-7d9f"}}

func newHook(t *testing.T, path string, timeout time.Duration) *Hook {
	t.Helper()
	h, err := New(Options{Command: path, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRebalance(t *testing.T) {
	ctx := context.Background()
	other := gpu.Move{Tenant: "batch", Pod: &gpu.Pod{Namespace: "jobs", Name: "train-0"}}
	plan := gpu.Plan{Reason: "llm-a misses its SLO on GPU-0", Moves: []gpu.Move{podMove, other, other}}
	for _, tc := range []struct {
		name, body string
		timeout    time.Duration
		err        string
		busy       bool  // the error is gpu.ErrBusy: the plan refused
		applied    []int // the moves a *gpu.PartialError names; nil: none
	}{
		{name: "applied", body: `echo "evicted serving/llm-a-7d9f"`, timeout: time.Second},
		{name: "failed", body: `echo "Cannot evict pod as it would violate the pod's disruption budget." >&2; exit 1`, timeout: time.Second, err: "exit status 1: Cannot evict pod"},
		{name: "refused (exit 3)", body: `echo "applied 1"; echo "Cannot evict pod as it would violate the pod's disruption budget." >&2; exit 3`, timeout: time.Second,
			err: "exit status 3: Cannot evict pod", busy: true},
		{name: "applied in part (exit 4): the moves its stdout names", body: `printf 'evicted serving/llm-a-7d9f\napplied 1\napplied 3\r\napplied 1\napplied 0\napplied 4\napplied x\n applied 2\n'; echo "budget" >&2; exit 4`,
			timeout: time.Second, err: "exit status 4: budget", applied: []int{0, 2}},
		{name: "applied in part (exit 4), naming none", body: `exit 4`, timeout: time.Second, err: "exit status 4", applied: []int{}},
		{name: "hang", body: `sleep 30`, timeout: 200 * time.Millisecond, err: "killed after its timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := commandtest.New(t)
			h := newHook(t, f.Script(t, "hook", tc.body), tc.timeout)
			err := h.Rebalance(ctx, plan)
			if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "rebalancing hook")) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if errors.Is(err, gpu.ErrBusy) != tc.busy {
				t.Errorf("error %v: errors.Is(gpu.ErrBusy) %v, want %v", err, errors.Is(err, gpu.ErrBusy), tc.busy)
			}
			var partial *gpu.PartialError
			if errors.As(err, &partial) != (tc.applied != nil) || partial != nil && !slices.Equal(partial.Applied, tc.applied) {
				t.Errorf("error %v: PartialError %+v, want one with the moves %v applied", err, partial, tc.applied)
			}
			var got gpu.Plan
			if err := json.Unmarshal([]byte(f.Stdin(t, "hook")), &got); err != nil {
				t.Fatalf("hook stdin is not a plan: %v", err)
			}
			if fmt.Sprint(got.Moves[0].Pod, got.Reason) != fmt.Sprint(plan.Moves[0].Pod, plan.Reason) {
				t.Errorf("hook read %+v, want %+v", got, plan)
			}
		})
	}
}

// TestPartialCutAtTheOutputCap: a hook whose stdout fills the 1 MiB that
// is kept of it, "applied 12" cut to "applied 1" at the cap, names move
// 12 made, not move 1, which it never reported: the cut line is not read;
// a last line without a newline short of the cap is.
func TestPartialCutAtTheOutputCap(t *testing.T) {
	moves := make([]gpu.Move, 12)
	for i := range moves {
		moves[i] = podMove
	}
	fill := command.DefaultMaxOutput - len("\napplied 1")
	for _, tc := range []struct {
		name, body string
		applied    []int
	}{
		{"cut at the cap", fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; printf '\napplied 12\n'; exit 4`, fill), []int{}},
		{"complete at the cap", fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; printf '\napplied 7\n'; exit 4`, fill-1), []int{6}},
		{"no newline short of the cap", `printf 'applied 2\napplied 5'; exit 4`, []int{1, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := commandtest.New(t)
			h := newHook(t, f.Script(t, "hook", tc.body), 10*time.Second)
			var partial *gpu.PartialError
			if err := h.Rebalance(context.Background(), gpu.Plan{Reason: "r", Moves: moves}); !errors.As(err, &partial) || !slices.Equal(partial.Applied, tc.applied) {
				t.Errorf("error %v: PartialError %+v, want one with the moves %v applied", err, partial, tc.applied)
			}
		})
	}
}

func TestRecommendRunsNothing(t *testing.T) {
	data, err := Recommend(gpu.Plan{Reason: "r", DryRun: true, Moves: []gpu.Move{podMove}, MIG: []gpu.MIGLayoutPlan{{UUID: "GPU-1", Profiles: []string{"3g.71gb", "4g.71gb"}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"reason":"r","dry_run":true,"moves":[{"tenant":"llm-a","from_uuid":"GPU-0","to_uuid":"GPU-1","pod":{"namespace":"serving","name":"llm-a-7d9f"}}],"mig":[{"uuid":"GPU-1","profiles":["3g.71gb","4g.71gb"]}]}` + "\n"
	if string(data) != want {
		t.Errorf("Recommend =\n%s\nwant\n%s", data, want)
	}
}

func TestValidate(t *testing.T) {
	ctx := context.Background()
	f := commandtest.New(t)
	h := newHook(t, f.Script(t, "hook", "exit 0"), time.Second)
	for _, tc := range []struct {
		name string
		plan gpu.Plan
		want string
	}{
		{"empty", gpu.Plan{}, "neither moves nor MIG layouts"},
		{"no workload", gpu.Plan{Moves: []gpu.Move{{Tenant: "t"}}}, `move 1 (tenant "t") names no workload`},
		{"bad pod", gpu.Plan{Moves: []gpu.Move{{Tenant: "t", Pod: &gpu.Pod{Namespace: "a/../b", Name: "p"}}}}, "not a valid Kubernetes name"},
		{"bad pod UID", gpu.Plan{Moves: []gpu.Move{{Tenant: "t", Pod: &gpu.Pod{Namespace: "a", Name: "p", UID: `x"}`}}}}, "is not a Kubernetes UID"},
		{"bad unit", gpu.Plan{Moves: []gpu.Move{{Tenant: "t", Unit: "../x.service"}}}, "not a systemd unit name"},
		{"to itself", gpu.Plan{Moves: []gpu.Move{{Tenant: "t", PID: 4, FromUUID: "GPU-0", ToUUID: "GPU-0"}}}, "to itself"},
		{"MIG without profiles", gpu.Plan{MIG: []gpu.MIGLayoutPlan{{UUID: "GPU-0"}}}, "MIG layout 1"},
	} {
		if err := h.Rebalance(ctx, tc.plan); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if calls := f.Calls(t, "hook"); len(calls) != 0 {
		t.Errorf("the hook ran for invalid plans: %v", calls)
	}
	if err := h.MoveProcess(ctx, 42, "GPU-1"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Stdin(t, "hook"), `"moves":[{"tenant":"","pid":42,"to_uuid":"GPU-1"}]`) {
		t.Errorf("MoveProcess handed %s", f.Stdin(t, "hook"))
	}
	if _, err := New(Options{Command: filepath.Join(f.Dir, "absent")}); err == nil {
		t.Error("New accepted a hook that does not exist")
	}
}

// The example hooks in deploy/hooks, run through Hook with fake kubectl and
// systemctl first on PATH.

func hookPath(t *testing.T, name string) string {
	t.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the example hooks need jq")
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "deploy", "hooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeKubectl answers the hook's reads of pods (kubectl get pod) with a
// ReplicaSet's pod of UID uidRead, but for the pods named below, and its
// evictions (kubectl create --raw) with success, but for train-0 (a
// budget's refusal, HTTP 429), gone-0 (NotFound of the pod: a move made),
// nopath-0 (a NotFound not of the pod: a failure) and made-0 (the
// precondition refused: a pod of the name made since the read).
const fakeKubectl = `if [ "$1" = get ]; then
	ns=$4 name=$5 uid=` + uidRead + ` owner='{"kind":"ReplicaSet","name":"r","controller":true}' ann='{}'
	case "$name" in
	gone-0) exit 0 ;;
	noread-0) echo 'Error from server (Forbidden): pods "noread-0" is forbidden: cannot get resource "pods"' >&2; exit 1 ;;
	bare-0) owner='{"kind":"ConfigMap","name":"c"}' ;;
	agent-0) owner='{"kind":"DaemonSet","name":"agent","controller":true}' ;;
	mirror-0) ann='{"kubernetes.io/config.mirror":"h"}' ;;
	static-0) owner='{"kind":"Node","name":"node0","controller":true}' ;;
	other-0) uid=9e5c8d1a-0000-4000-8000-000000000001 ;;
	junk-0) echo '<html>sign in</html>'; exit 0 ;;
	esac
	printf '{"metadata":{"namespace":"%s","name":"%s","uid":"%s","ownerReferences":[%s],"annotations":%s}}\n' "$ns" "$name" "$uid" "$owner" "$ann"
	exit 0
fi
case "$*" in *train-0*) if ! grep -q dryRun "$STDIN"; then echo 'Error from server (TooManyRequests): Cannot evict pod as it would violate the pod'"'"'s disruption budget.' >&2; exit 1; fi ;;
*/nopath-0/*) echo 'Error from server (NotFound): the server could not find the requested resource' >&2; exit 1 ;;
*/made-0/*) echo 'Error from server (Conflict): Precondition failed: UID in precondition: ` + uidRead + `, UID in object meta: 9e5c8d1a-0000-4000-8000-000000000001' >&2; exit 1 ;;
*/evgone-0/*) echo 'Error from server (NotFound): pods "evgone-0" not found' >&2; exit 1 ;;
esac
echo '{"kind":"Status","status":"Success"}'`

// uidRead is the UID of the pods fakeKubectl reads.
const uidRead = "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5"

// evictionOf is the Eviction body the hook sends for ns/name, pinned to
// uidRead, with dryRun=All where dry.
func evictionOf(ns, name string, dry bool) string {
	opts := `{"preconditions":{"uid":"` + uidRead + `"}}`
	if dry {
		opts = `{"dryRun":["All"],"preconditions":{"uid":"` + uidRead + `"}}`
	}
	return `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"deleteOptions":` + opts + `}`
}

func TestKubernetesEvictHook(t *testing.T) {
	ctx := context.Background()
	pod := func(name, uid string) gpu.Move {
		return gpu.Move{Tenant: "batch", Pod: &gpu.Pod{Namespace: "jobs", Name: name, UID: uid}}
	}
	second := pod("train-0", "")
	static := gpu.Move{Tenant: "etcd", Pod: &gpu.Pod{Namespace: "kube-system", Name: "etcd-node0", UID: "0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5"}}
	for _, tc := range []struct {
		name    string
		plan    gpu.Plan
		err     string
		busy    bool     // the error is gpu.ErrBusy: the plan refused
		applied []int    // the moves a *gpu.PartialError names; nil: none
		reads   []string // the pods read, in order (nil: those evicted)
		bodies  []string // Eviction bodies kubectl read, in order
	}{
		{
			name:   "evicts every pod, reports the one a budget protects",
			plan:   gpu.Plan{Reason: "r", Moves: []gpu.Move{podMove, second}},
			err:    "kubernetes-evict: eviction of jobs/train-0 (tenant batch) refused for now: a PodDisruptionBudget",
			bodies: []string{evictionOf("serving", "llm-a-7d9f", false), evictionOf("jobs", "train-0", false)}, applied: []int{0},
		},
		{
			name: "a budget refusing every eviction: refused",
			plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{second}},
			err:  "exit status 3", busy: true,
			bodies: []string{evictionOf("jobs", "train-0", false)},
		},
		{
			name:   "dry run asks the API server with dryRun=All",
			plan:   gpu.Plan{Reason: "r", DryRun: true, Moves: []gpu.Move{second}},
			bodies: []string{evictionOf("jobs", "train-0", true)},
		},
		{
			name:   "a pod gone already is a move made, when read or evicted",
			plan:   gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("gone-0", ""), pod("evgone-0", ""), podMove}},
			reads:  []string{"jobs/gone-0", "jobs/evgone-0", "serving/llm-a-7d9f"},
			bodies: []string{evictionOf("jobs", "evgone-0", false), evictionOf("serving", "llm-a-7d9f", false)},
		},
		{
			name:   "the pod's UID, the move's, is the precondition",
			plan:   gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("train-1", uidRead)}},
			bodies: []string{evictionOf("jobs", "train-1", false)},
		},
		{
			name:   "the pod's UID is the precondition of a dry run",
			plan:   gpu.Plan{Reason: "r", DryRun: true, Moves: []gpu.Move{pod("train-1", uidRead)}},
			bodies: []string{evictionOf("jobs", "train-1", true)},
		},
		{
			name:  "a pod read that is not the move's is not evicted",
			plan:  gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("other-0", uidRead)}},
			err:   "exit status 1: kubernetes-evict: eviction of jobs/other-0 (tenant batch) failed: it is not the pod planned (uid " + uidRead + ", the API server's 9e5c8d1a-0000-4000-8000-000000000001), made since; not evicted",
			reads: []string{"jobs/other-0"},
		},
		{
			name:   "a pod of the name made since the read is not evicted",
			plan:   gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("made-0", "")}},
			err:    "it is not the pod read (uid " + uidRead + "), made since; not evicted",
			bodies: []string{evictionOf("jobs", "made-0", false)},
		},
		{
			name:   "a static pod is not sent an eviction",
			plan:   gpu.Plan{Reason: "r", Moves: []gpu.Move{static, podMove}},
			err:    "is a static pod (uid 0f2c3d4e5a6b4c7d8e9fa0b1c2d3e4f5): an eviction leaves it running; not evicted",
			bodies: []string{evictionOf("serving", "llm-a-7d9f", false)}, applied: []int{1},
		},
		{
			name:  "pods an eviction would not move are refused",
			plan:  gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("bare-0", ""), pod("agent-0", ""), pod("mirror-0", ""), pod("static-0", "")}},
			err:   "exit status 3: kubernetes-evict: jobs/bare-0 (tenant batch) not evicted: no controller owns it: evicted, it would be deleted for good, not moved",
			reads: []string{"jobs/bare-0", "jobs/agent-0", "jobs/mirror-0", "jobs/static-0"}, busy: true,
		},
		{
			name:    "a bare pod refused, the next evicted: applied in part",
			plan:    gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("bare-0", ""), podMove}},
			err:     "exit status 4",
			reads:   []string{"jobs/bare-0", "serving/llm-a-7d9f"},
			bodies:  []string{evictionOf("serving", "llm-a-7d9f", false)},
			applied: []int{1},
		},
		{
			name:  "a pod not read, or read as no pod, fails",
			plan:  gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("noread-0", ""), pod("junk-0", "")}},
			err:   "exit status 1: Error from server (Forbidden)",
			reads: []string{"jobs/noread-0", "jobs/junk-0"},
		},
		{
			name:   "a NotFound not of the pod fails",
			plan:   gpu.Plan{Reason: "r", Moves: []gpu.Move{pod("nopath-0", "")}},
			err:    "eviction of jobs/nopath-0 (tenant batch) failed",
			bodies: []string{evictionOf("jobs", "nopath-0", false)},
		},
		{name: "a move without a pod evicts nothing", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{podMove, {Tenant: "x", Unit: "x.service"}}}, err: "exit status 2", reads: []string{}},
		{name: "MIG layouts refused", plan: gpu.Plan{Reason: "r", MIG: []gpu.MIGLayoutPlan{{UUID: "GPU-0", Profiles: []string{"7g.141gb"}}}}, err: "nvidia.com/mig.config", reads: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := commandtest.New(t)
			f.Script(t, "kubectl", fakeKubectl)
			f.OnPath(t)
			h := newHook(t, hookPath(t, "kubernetes-evict.sh"), 10*time.Second)
			err := h.Rebalance(ctx, tc.plan)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if errors.Is(err, gpu.ErrBusy) != tc.busy {
				t.Errorf("error %v: errors.Is(gpu.ErrBusy) %v, want %v", err, errors.Is(err, gpu.ErrBusy), tc.busy)
			}
			var partial *gpu.PartialError
			if errors.As(err, &partial) != (tc.applied != nil) || partial != nil && !slices.Equal(partial.Applied, tc.applied) {
				t.Errorf("error %v: PartialError %+v, want one with the moves %v applied", err, partial, tc.applied)
			}
			var evictions, reads []string
			for _, c := range f.Calls(t, "kubectl") {
				switch {
				case len(c) == 8 && c[0] == "get" && c[1] == "pod" && c[2] == "--namespace" && c[5] == "--ignore-not-found":
					reads = append(reads, c[3]+"/"+c[4])
				case len(c) == 5 && c[0] == "create" && c[1] == "--raw":
					evictions = append(evictions, c[2])
				default:
					t.Errorf("kubectl %q", c)
				}
			}
			wantReads := tc.reads
			var wantPaths []string
			for _, b := range tc.bodies {
				var ev struct{ Metadata gpu.Pod }
				if err := json.Unmarshal([]byte(b), &ev); err != nil {
					t.Fatal(err)
				}
				wantPaths = append(wantPaths, fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/eviction", ev.Metadata.Namespace, ev.Metadata.Name))
				if tc.reads == nil {
					wantReads = append(wantReads, ev.Metadata.Namespace+"/"+ev.Metadata.Name)
				}
			}
			if !slices.Equal(reads, wantReads) || !slices.Equal(evictions, wantPaths) {
				t.Errorf("kubectl read %q and evicted %q, want %q and %q", reads, evictions, wantReads, wantPaths)
			}
			if got := strings.ReplaceAll(strings.TrimSpace(f.Stdin(t, "kubectl")), "\n", ""); got != strings.Join(tc.bodies, "") {
				t.Errorf("kubectl read\n%s\nwant\n%s", got, strings.Join(tc.bodies, ""))
			}
		})
	}
}

// A unit's name is as systemd escapes it (train@gpu\x2d0.service, a '-'
// of its instance written \x2d), as kube.SystemdService reads it from the
// cgroup path and Validate takes it; before, the hook refused it as "needs
// a .service unit". Restarts that fail after others were made exit 4,
// naming the moves made (each move of a unit restarted: PIDs of one
// service are one restart) with "applied N"; a systemctl failing
// otherwise, whatever its status (3: refused, to the contract), is 1.
func TestSystemdMoveHook(t *testing.T) {
	ctx := context.Background()
	moves := []gpu.Move{
		{Tenant: "llm-a", Unit: "llm-a.service", FromUUID: "GPU-0", ToUUID: "GPU-1"},
		{Tenant: "llm-b", Unit: "llm-b@2.service", ToUUID: "MIG-5c1e"},
		{Tenant: "train", Unit: `train@gpu\x2d0.service`, ToUUID: "GPU-2"},
	}
	restarts := `[[daemon-reload] [restart llm-a.service] [restart llm-b@2.service] [restart train@gpu\x2d0.service]]`
	for _, tc := range []struct {
		name, systemctl string
		plan            gpu.Plan
		err             string
		calls           string
		dropins         bool
		applied         []int // the moves a *gpu.PartialError names; nil: none
	}{
		{name: "drop-ins, one reload, restarts", plan: gpu.Plan{Reason: "r", Moves: moves},
			calls: restarts, dropins: true},
		{name: "a failed restart is reported, the others made", systemctl: `[ "$2" = llm-a.service ] && { echo "Job for llm-a.service failed" >&2; exit 1; }; exit 0`,
			plan: gpu.Plan{Reason: "r", Moves: moves}, err: "exit status 4: Job for llm-a.service failed; systemd-move: restart of llm-a.service (tenant llm-a) failed",
			calls: restarts, dropins: true, applied: []int{1, 2}},
		{name: "every restart failing", systemctl: `[ "$1" = restart ] && exit 3; exit 0`,
			plan: gpu.Plan{Reason: "r", Moves: moves}, err: "exit status 1: systemd-move: restart of llm-a.service (tenant llm-a) failed",
			calls: restarts, dropins: true},
		{name: "the reload failing with 3 is no refusal", systemctl: `echo "Access denied" >&2; exit 3`,
			plan: gpu.Plan{Reason: "r", Moves: moves}, err: "exit status 1: Access denied", calls: "[[daemon-reload]]", dropins: true},
		{name: "a unit found from PIDs failing: the others' moves made", systemctl: `[ "$2" = 'train@gpu\x2d0.service' ] && exit 1; exit 0`,
			plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{
				{Tenant: "train", PID: 21, ToUUID: "GPU-2"}, {Tenant: "llm-a", PID: 10, ToUUID: "GPU-1"}, {Tenant: "llm-b", PID: 20, ToUUID: "MIG-5c1e"},
				{Tenant: "llm-a", PID: 11, ToUUID: "GPU-1"}, {Tenant: "train", PID: 22, ToUUID: "GPU-2"}}},
			err: "exit status 4", calls: `[[daemon-reload] [restart train@gpu\x2d0.service] [restart llm-a.service] [restart llm-b@2.service]]`, dropins: true, applied: []int{1, 3, 2}},
		{name: "dry run changes nothing", plan: gpu.Plan{Reason: "r", DryRun: true, Moves: moves}, calls: "[]"},
		{name: "a move without a unit", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{moves[0], {Tenant: "x", PID: 3, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "units found from the PIDs, each restarted once", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{
			{Tenant: "llm-a", PID: 10, ToUUID: "GPU-1"}, {Tenant: "llm-a", PID: 11, ToUUID: "GPU-1"}, {Tenant: "llm-b", PID: 20, ToUUID: "MIG-5c1e"},
			{Tenant: "train", PID: 21, ToUUID: "GPU-2"}, {Tenant: "train", PID: 22, ToUUID: "GPU-2"}}},
			calls: restarts, dropins: true},
		{name: "a PID outside a service", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 30, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a container's PID is not its runtime's service", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 31, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a user manager's unit is not the system's", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 32, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a forged cgroup line names no service", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 33, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a forged named hierarchy names no service", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 34, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a service's own cgroup named like another service", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 35, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a subgroup of a service's own cgroup named like another service", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 36, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a service's own cgroup named like another service below a slice it made", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 37, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "a subgroup of it", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 38, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "it, read through a cgroup namespace", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", PID: 39, ToUUID: "GPU-1"}}}, err: "needs a .service unit", calls: "[]"},
		{name: "one service to two GPUs", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "llm-a", PID: 10, ToUUID: "GPU-1"}, {Tenant: "llm-a", Unit: "llm-a.service", ToUUID: "GPU-2"}}}, err: "moves llm-a.service to more than one GPU", calls: "[]"},
		{name: "a move without a GPU", plan: gpu.Plan{Reason: "r", Moves: []gpu.Move{{Tenant: "x", Unit: "x.service"}}}, err: "needs a .service unit and a GPU UUID", calls: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := commandtest.New(t)
			f.Script(t, "systemctl", tc.systemctl)
			f.OnPath(t)
			unitDir := t.TempDir()
			t.Setenv("SYSTEMD_UNIT_DIR", unitDir)
			t.Setenv("PROC_ROOT", fakeProcRoot(t, map[int]string{
				10: "0::/system.slice/llm-a.service\n",
				11: "0::/system.slice/llm-a.service/worker\n",
				20: "12:memory:/system.slice/system-llm.slice/llm-b@2.service\n1:name=systemd:/system.slice/system-llm.slice/llm-b@2.service\n",
				21: `0::/system.slice/system-train.slice/train@gpu\x2d0.service` + "\n",
				// read through a cgroup namespace: its slices below the ..
				22: `0::/../../system-train.slice/train@gpu\x2d0.service/worker` + "\n",
				30: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope\n",
				31: "12:memory:/kubepods/burstable/pod" + "0f2c3d4e-5a6b-4c7d-8e9f-a0b1c2d3e4f5/" + strings.Repeat("ab", 32) + "\n1:name=systemd:/system.slice/containerd.service\n",
				32: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/trainer.service\n",
				// a tenant's delegated cgroup named with a line break, forging
				// another service's line (hybrid: v1 name=systemd, then v2;
				// v1 only: a named hierarchy listed first)
				33: "1:name=systemd:/system.slice/tenant.service/x\n0::/system.slice/victim.service\n0::/system.slice/tenant.service\n",
				// a service's own cgroup named like another service
				35: "0::/system.slice/tenant.service/sshd.service\n",
				36: "0::/system.slice/tenant.service/sshd.service/worker\n",
				34: "4:memory:/system.slice/tenant.service/x\n9:name=systemd:/system.slice/victim.service\n1:name=systemd:/system.slice/tenant.service\n",
				// and below a slice it made: every cgroup above a unit must
				// be a slice
				37: "0::/system.slice/tenant.service/x.slice/sshd.service\n",
				38: "0::/system.slice/tenant.service/x.slice/sshd.service/worker\n",
				39: "0::/../../tenant.service/x.slice/sshd.service\n",
			}))
			h := newHook(t, hookPath(t, "systemd-move.sh"), 10*time.Second)
			err := h.Rebalance(ctx, tc.plan)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if got := fmt.Sprint(f.Calls(t, "systemctl")); got != tc.calls {
				t.Errorf("systemctl calls %s, want %s", got, tc.calls)
			}
			if errors.Is(err, gpu.ErrBusy) {
				t.Errorf("error %v reads as refused", err)
			}
			var partial *gpu.PartialError
			if errors.As(err, &partial) != (tc.applied != nil) || partial != nil && !slices.Equal(partial.Applied, tc.applied) {
				t.Errorf("error %v: PartialError %+v, want one with the moves %v applied", err, partial, tc.applied)
			}
			for _, m := range moves {
				data, err := os.ReadFile(filepath.Join(unitDir, m.Unit+".d", "50-vgpu-gpu.conf"))
				if !tc.dropins {
					if err == nil {
						t.Errorf("drop-in for %s written: %s", m.Unit, data)
					}
					continue
				}
				if err != nil || !strings.Contains(string(data), "[Service]\nEnvironment=CUDA_VISIBLE_DEVICES="+m.ToUUID+"\n") {
					t.Errorf("drop-in for %s: %q, %v", m.Unit, data, err)
				}
			}
		})
	}
}

// A hook whose jq or kubectl (systemctl) is missing, or whose SYSTEMCTL or
// KUBECTL names a path there but no program (a file not executable, a
// directory), says so, naming it, and exits 127 having done nothing.
// Before, a missing jq was "the plan on stdin is not a JSON object" (exit
// 2, as a bad plan), a missing kubectl an eviction failed, and a missing
// systemctl was found after the drop-ins were written; dash's command -v
// took any path there: the systemd hook wrote every drop-in and failed at
// the reload (126), leaving drop-ins that move the units at their next
// restart, and the Kubernetes hook reported each eviction refused, as by a
// budget (1).
func TestExampleHooksNameAMissingTool(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		hook, what string
		missing    string            // the tool left off PATH
		env        map[string]string // the tool named to the hook
		want       string            // what follows "cannot run: "
	}{
		{hook: "kubernetes-evict.sh", what: "without jq", missing: "jq", want: "jq not found"},
		{hook: "kubernetes-evict.sh", what: "without kubectl", missing: "kubectl", want: "kubectl not found"},
		{hook: "kubernetes-evict.sh", what: "without /opt/k8s/kubectl", missing: "/opt/k8s/kubectl", env: map[string]string{"KUBECTL": "/opt/k8s/kubectl"}, want: "/opt/k8s/kubectl not found"},
		{hook: "systemd-move.sh", what: "without jq", missing: "jq", want: "jq not found"},
		{hook: "systemd-move.sh", what: "without systemctl", missing: "systemctl", want: "systemctl not found"},
		{hook: "systemd-move.sh", what: "without /usr/local/bin/no-systemctl", missing: "/usr/local/bin/no-systemctl", env: map[string]string{"SYSTEMCTL": "/usr/local/bin/no-systemctl"}, want: "/usr/local/bin/no-systemctl not found"},
		{hook: "systemd-move.sh", what: "SYSTEMCTL not executable", env: map[string]string{"SYSTEMCTL": notExec}, want: notExec + " not found, or not an executable file"},
		{hook: "systemd-move.sh", what: "SYSTEMCTL a directory", env: map[string]string{"SYSTEMCTL": dir}, want: dir + " not found, or not an executable file"},
		{hook: "kubernetes-evict.sh", what: "KUBECTL not executable", env: map[string]string{"KUBECTL": notExec}, want: notExec + " not found, or not an executable file"},
		{hook: "kubernetes-evict.sh", what: "KUBECTL a directory", env: map[string]string{"KUBECTL": dir}, want: dir + " not found, or not an executable file"},
	} {
		t.Run(tc.hook+" "+tc.what, func(t *testing.T) {
			script := hookPath(t, tc.hook)
			// PATH: the fakes and the tools the hooks use, but the missing one
			f := commandtest.New(t)
			for _, fake := range []string{"kubectl", "systemctl"} {
				if fake != tc.missing {
					f.Script(t, fake, "")
				}
			}
			for _, tool := range []string{"jq", "cat", "mktemp", "rm", "cut", "sort", "uniq", "tr", "grep", "sed", "head", "mkdir", "mv"} {
				p, err := exec.LookPath(tool)
				if tool == tc.missing || err != nil {
					continue
				}
				if err := os.Symlink(p, filepath.Join(f.Dir, tool)); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", f.Dir)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			unitDir := t.TempDir()
			t.Setenv("SYSTEMD_UNIT_DIR", unitDir)
			h := newHook(t, script, 10*time.Second)
			err := h.Rebalance(context.Background(), gpu.Plan{Reason: "r", Moves: []gpu.Move{
				{Tenant: "llm-a", Unit: "llm-a.service", ToUUID: "GPU-1", Pod: podMove.Pod}}})
			want := strings.TrimSuffix(tc.hook, ".sh") + ": cannot run: " + tc.want
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "exit status 127") {
				t.Fatalf("error %v, want exit status 127 and %q", err, want)
			}
			if calls := len(f.Calls(t, "kubectl")) + len(f.Calls(t, "systemctl")); calls != 0 {
				t.Errorf("%d calls of kubectl and systemctl, want none", calls)
			}
			if entries, _ := os.ReadDir(unitDir); len(entries) != 0 {
				t.Errorf("drop-ins written: %v", entries)
			}
		})
	}
}

// A plan whose moves or mig is not an array of objects (or, for the
// Kubernetes hook, a move's pod not an object) is a bad plan: exit 2,
// saying so, nothing done; before, jq's error ended the hook with its own
// status (5).
func TestExampleHooksRefuseMalformedPlans(t *testing.T) {
	for _, tc := range []struct{ hook, plan string }{
		{"systemd-move.sh", `{"moves":5}`},
		{"systemd-move.sh", `{"moves":"llm-a.service"}`},
		{"systemd-move.sh", `{"moves":[5]}`},
		{"systemd-move.sh", `{"mig":true}`},
		{"kubernetes-evict.sh", `{"moves":5}`},
		{"kubernetes-evict.sh", `{"moves":{"a":{"tenant":"a"}}}`},
		{"kubernetes-evict.sh", `{"moves":["serving/llm-a-7d9f"]}`},
		{"kubernetes-evict.sh", `{"moves":[{"tenant":"a","pod":5}]}`},
		{"kubernetes-evict.sh", `{"mig":true}`},
	} {
		t.Run(tc.hook+" "+tc.plan, func(t *testing.T) {
			f := commandtest.New(t)
			f.Script(t, "kubectl", "")
			f.Script(t, "systemctl", "")
			f.OnPath(t)
			unitDir := t.TempDir()
			t.Setenv("SYSTEMD_UNIT_DIR", unitDir)
			cmd := exec.Command(hookPath(t, tc.hook))
			cmd.Stdin = strings.NewReader(tc.plan)
			out, err := cmd.CombinedOutput()
			want := strings.TrimSuffix(tc.hook, ".sh") + ": the plan's moves and mig are not arrays of objects"
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), want) {
				t.Errorf("exit %d (%v), output %q; want exit 2 and %q", code, err, out, want)
			}
			if calls := len(f.Calls(t, "kubectl")) + len(f.Calls(t, "systemctl")); calls != 0 {
				t.Errorf("%d calls of kubectl and systemctl, want none", calls)
			}
			if entries, _ := os.ReadDir(unitDir); len(entries) != 0 {
				t.Errorf("drop-ins written: %v", entries)
			}
		})
	}
}

// kubernetes-evict.sh writes no file: the chart's container has a
// read-only root filesystem and no writable /tmp, which a mount namespace
// makes of /tmp (and $TMPDIR) here; before, its mktemp failed every plan
// ("Read-only file system").
func TestKubernetesEvictHookWritesNoFile(t *testing.T) {
	script := hookPath(t, "kubernetes-evict.sh")
	readOnly := `for d in /tmp "${TMPDIR:-/tmp}"; do mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 1; done`
	if err := exec.Command("unshare", "-rm", "sh", "-c", readOnly).Run(); err != nil {
		t.Skipf("no read-only /tmp in a mount namespace here (unshare -rm: %v)", err)
	}
	dir := t.TempDir()
	// kubectl as the fakes of commandtest but for the file they write
	kubectl := "#!/bin/sh\ncat >/dev/null\n" +
		`[ "$1" != get ] || { printf '{"metadata":{"namespace":"%s","name":"%s","uid":"` + uidRead + `","ownerReferences":[{"kind":"Job","name":"j","controller":true}]}}\n' "$4" "$5"; exit 0; }` +
		"\necho '{\"kind\":\"Status\",\"status\":\"Success\"}'\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(kubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	inPod := filepath.Join(dir, "hook-in-pod")
	if err := os.WriteFile(inPod, []byte("#!/bin/sh\nexec unshare -rm sh -c '"+readOnly+" && exec \"$0\"' '"+script+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var buf bytes.Buffer
	h, err := New(Options{Command: inPod, Timeout: 10 * time.Second, Logger: log.NewLogfmtLogger(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Rebalance(context.Background(), gpu.Plan{Reason: "r", Moves: []gpu.Move{podMove, {Tenant: "batch", Pod: &gpu.Pod{Namespace: "jobs", Name: "train-0"}}}}); err != nil {
		t.Fatalf("a plan of two evictions with /tmp read-only: %v", err)
	}
	if got := buf.String(); !strings.Contains(got, "evicted serving/llm-a-7d9f") || !strings.Contains(got, "evicted jobs/train-0") {
		t.Errorf("the hook's output lacks the evictions: %s", got)
	}
}

// fakeProcRoot is a directory with PID/cgroup files of the given contents.
func fakeProcRoot(t *testing.T, cgroups map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, cg := range cgroups {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The hook is handed every plan, moves and MIG layouts alike, so it lists
// both knobs on every GPU: the tuner refuses up front a change of a knob
// no backend lists, and a host whose MIG layouts go to the hook alone
// would have had every relayout refused.
func TestHookListsWhatItIsHanded(t *testing.T) {
	h, err := New(Options{Command: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	got := h.Capabilities("GPU-0")
	for _, k := range []gpu.Knob{gpu.KnobPlacement, gpu.KnobMIGLayout} {
		if !slices.Contains(got, k) {
			t.Errorf("capabilities %v lack %s", got, k)
		}
	}
}

// A hook that exits 0 has applied the plan, whatever it printed; what it
// said on stderr is logged with its stdout, shortened and escaped (before,
// only stdout was: "Error: ..." on stderr with exit 0 left no trace).
func TestHookStderrLoggedOnSuccess(t *testing.T) {
	f := commandtest.New(t)
	var buf bytes.Buffer
	h, err := New(Options{Command: f.Script(t, "hook", `echo "evicted serving/llm-a-7d9f"; echo "Warning: pod llm-a-7d9f has no PodDisruptionBudget" >&2; head -c 100000 /dev/zero >&2`),
		Timeout: 10 * time.Second, Logger: log.NewLogfmtLogger(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Rebalance(context.Background(), gpu.Plan{Reason: "r", Moves: []gpu.Move{podMove}}); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	if !strings.Contains(got, `output="evicted serving/llm-a-7d9f"`) || !strings.Contains(got, `stderr="Warning: pod llm-a-7d9f has no PodDisruptionBudget; \\x00`) || len(got) > 2000 {
		t.Errorf("log of %d bytes lacks the hook's stdout and stderr: %.600s", len(got), got)
	}
}
