//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hookResult is one run of the Kubernetes rebalancing hook.
type hookResult struct {
	exit           int
	stdout, stderr string
	kubectlCalls   int
	took           time.Duration
}

// releaseKubeconfig writes a kubeconfig holding a token of the release's
// own service account (the one its DaemonSet's pods run as), obtained
// through the TokenRequest API, and returns its path: what the hook gets
// in the exporter's pod, where kubectl reads the mounted token. The token
// alone is in the file releaseTokenFile, as the pod has it mounted.
func (c *cluster) releaseKubeconfig(ctx context.Context) string {
	t := c.t
	t.Helper()
	ds, err := c.client.AppsV1().DaemonSets(releaseNS).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := ds.Spec.Template.Spec.ServiceAccountName
	if sa == "" || sa == "default" {
		t.Fatalf("DaemonSet %s runs as service account %q, not the release's own", release, sa)
	}
	ttl := int64(600)
	tr, err := c.client.CoreV1().ServiceAccounts(releaseNS).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for service account %s/%s: %v", releaseNS, sa, err)
	}
	if err := os.WriteFile(c.releaseTokenFile(), []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	path := c.path("hook.kubeconfig")
	if err := writeKubeconfig(path, c.rest.Host, c.rest.CAFile, sa, fmt.Sprintf("{token: %q}", tr.Status.Token)); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *cluster) releaseTokenFile() string { return c.path("release.token") }

// runBuiltinEviction evicts p's pod with the exporter's built-in eviction
// (gpu/kubeevict, --tuner.rebalance-hook=builtin:kubernetes-evict) and the
// release's token (releaseKubeconfig writes it): its test TestLiveCluster,
// built from the repository, checks the requests (the pod's read, one
// eviction where the read allows it) and the outcome want (forbidden,
// budget, evicted, gone or replaced).
func (c *cluster) runBuiltinEviction(ctx context.Context, p podRef, want string) {
	c.t.Helper()
	c.runBuiltinEvictionOf(ctx, p, "", want)
}

// runBuiltinEvictionOf is runBuiltinEviction of p's pod with uid (none:
// "") as the move's (outcome replaced: the pod of the name read is
// another).
func (c *cluster) runBuiltinEvictionOf(ctx context.Context, p podRef, uid, want string) {
	t := c.t
	t.Helper()
	bin := c.path("kubeevict.test")
	if _, err := os.Stat(bin); err != nil {
		if out, err := run(ctx, repoRoot(), nil, "nice", "-n", "19", "go", "test", "-c", "-o", bin, "./gpu/kubeevict"); err != nil {
			t.Fatalf("build the built-in eviction's test: %v\n%s", err, out)
		}
	}
	out, err := run(ctx, c.dir, []string{"VGPU_EVICT_API=" + c.rest.Host, "VGPU_EVICT_CA=" + c.rest.CAFile,
		"VGPU_EVICT_TOKEN=" + c.releaseTokenFile(), "VGPU_EVICT_NAMESPACE=" + p.namespace, "VGPU_EVICT_POD=" + p.name,
		"VGPU_EVICT_UID=" + uid, "VGPU_EVICT_WANT=" + want}, bin, "-test.run=^TestLiveCluster$", "-test.v", "-test.count=1")
	if err != nil || !strings.Contains(out, "--- PASS: TestLiveCluster") {
		t.Fatalf("built-in eviction of %s, want %s: %v\n%s", p, want, err, out)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "built-in eviction") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// runHook runs deploy/hooks/kubernetes-evict.sh with a plan moving pod
// (a dry run: dryRun=All), through a kubectl that counts its calls, with
// the credentials of kubeconfig.
func (c *cluster) runHook(ctx context.Context, kubeconfig string, p podRef, dryRun bool) hookResult {
	t := c.t
	t.Helper()
	calls := filepath.Join(c.dir, "kubectl-calls")
	_ = os.Remove(calls)
	shim := filepath.Join(c.dir, "kubectl-counting")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\nexec %q \"$@\"\n", calls, filepath.Join(c.bin, "kubectl"))
	if err := os.WriteFile(shim, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	plan, err := json.Marshal(map[string]any{
		"moves": []any{map[string]any{
			"tenant":    p.team,
			"from_uuid": p.uuid,
			"pod":       map[string]string{"namespace": p.namespace, "name": p.name},
		}},
		"dry_run": dryRun,
	})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", filepath.Join(repoRoot(), "deploy", "hooks", "kubernetes-evict.sh"))
	cmd.Env = append(os.Environ(), "KUBECTL="+shim, "KUBECONFIG="+kubeconfig, "HOME="+c.dir)
	cmd.Stdin = strings.NewReader(string(plan))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err = cmd.Run()
	r := hookResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(began)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kubernetes-evict.sh: %v", err)
	}
	if b, err := os.ReadFile(calls); err == nil {
		r.kubectlCalls = strings.Count(string(b), "\n")
	}
	return r
}

// checkHookForbidden runs the rebalancing hook on p's pod with the
// release's token while the release grants no eviction (no evictPods):
// the API server refuses the pod's read (403), the hook reports it and the
// pod stays.
func (c *cluster) checkHookForbidden(ctx context.Context, p podRef) {
	t := c.t
	t.Helper()
	before, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := c.runHook(ctx, c.releaseKubeconfig(ctx), p, false)
	c.runBuiltinEviction(ctx, p, "forbidden")
	t.Logf("hook without the eviction grant: exit %d, %d kubectl call(s); stderr: %s", r.exit, r.kubectlCalls, strings.TrimSpace(r.stderr))
	if r.exit != 1 || r.kubectlCalls != 1 || !strings.Contains(r.stderr, "Forbidden") ||
		!strings.Contains(r.stderr, `"pods"`) || !strings.Contains(r.stderr, "eviction of "+p.namespace+"/"+p.name) {
		t.Fatalf("a read of the pod the release's RBAC does not grant must be refused (403) and reported once: exit %d, %d calls\nstdout: %s\nstderr: %s",
			r.exit, r.kubectlCalls, r.stdout, r.stderr)
	}
	after, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil || after.UID != before.UID || after.DeletionTimestamp != nil {
		t.Fatalf("pod %s/%s was disrupted without a grant: %v", p.namespace, p.name, err)
	}
}

// checkRebalancingHook moves p's pod with the rebalancing hook, run with
// the release's service account token and RBAC (evictPods on): first
// against a PodDisruptionBudget that allows no disruption (the eviction is
// refused, reported once and not retried, the pod stays), then without it
// (the pod is evicted and its Deployment makes a new one, which gets a
// GPU). It returns the GPUs held afterwards.
func (c *cluster) checkRebalancingHook(ctx context.Context, p podRef) []podRef {
	t := c.t
	t.Helper()
	kubeconfig := c.releaseKubeconfig(ctx)
	dropBudget := c.createBudget(ctx, p.namespace)
	before, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r := c.runHook(ctx, kubeconfig, p, false)
	c.runBuiltinEviction(ctx, p, "budget")
	t.Logf("hook with the budget: exit %d in %v, %d kubectl call(s); stderr: %s", r.exit, r.took.Round(time.Millisecond), r.kubectlCalls, strings.TrimSpace(r.stderr))
	if r.exit != 3 || r.kubectlCalls != 2 || !strings.Contains(r.stderr, "eviction of "+p.namespace+"/"+p.name) ||
		!strings.Contains(r.stderr, "disruption budget") || strings.Contains(r.stdout, "evicted") {
		t.Fatalf("a refused eviction must be reported once (exit 3, refused: the pod's read and one eviction, stderr naming the pod): exit %d, %d calls\nstdout: %s\nstderr: %s",
			r.exit, r.kubectlCalls, r.stdout, r.stderr)
	}
	after, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil || after.UID != before.UID || after.DeletionTimestamp != nil {
		t.Fatalf("pod %s/%s was disrupted despite its budget: %v", p.namespace, p.name, err)
	}

	dropBudget()
	// The hook's dry run passes the API server's checks and leaves the
	// pod; the built-in eviction evicts it.
	r = c.runHook(ctx, kubeconfig, p, true)
	if r.exit != 0 || !strings.Contains(r.stdout, "evicted "+p.namespace+"/"+p.name) || !strings.Contains(r.stdout, "dry run true") {
		t.Fatalf("dry-run eviction without a budget: exit %d\nstdout: %s\nstderr: %s", r.exit, r.stdout, r.stderr)
	}
	t.Logf("hook without the budget: %s", strings.TrimSpace(r.stdout))
	if got, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{}); err != nil || got.UID != before.UID || got.DeletionTimestamp != nil {
		t.Fatalf("pod %s/%s was disrupted by a dry run: %v", p.namespace, p.name, err)
	}
	// With another pod's UID as its precondition (the pod planned replaced
	// since by one of its name), the API server refuses the eviction and
	// the pod stays; with its own, it is evicted.
	c.runBuiltinEvictionOf(ctx, p, "9e5c8d1a-0000-4000-8000-000000000001", "replaced")
	if got, err := c.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{}); err != nil || got.UID != before.UID || got.DeletionTimestamp != nil {
		t.Fatalf("pod %s/%s was disrupted by an eviction whose precondition names another pod: %v", p.namespace, p.name, err)
	}
	c.runBuiltinEvictionOf(ctx, p, string(before.UID), "evicted")
	// The Deployment's new pod replaces the evicted one and gets a GPU.
	c.waitPodGone(ctx, p)
	// An eviction of the pod gone already is a move made (as kubectl
	// drain takes it), not a failure.
	c.runBuiltinEviction(ctx, p, "gone")
	now := c.waitGPUsHeld(ctx)
	for _, q := range now {
		if q.namespace == p.namespace {
			pod, err := c.client.CoreV1().Pods(q.namespace).Get(ctx, q.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if q.name == p.name || len(pod.OwnerReferences) == 0 || pod.OwnerReferences[0].Kind != "ReplicaSet" {
				t.Fatalf("pod %s is not a new pod of the Deployment", q)
			}
			if pod.Status.Phase != corev1.PodRunning {
				t.Fatalf("new pod %s: %s", q, describePod(pod))
			}
		}
	}
	return now
}
