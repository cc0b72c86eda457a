package helmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// TestPodMetadataURL: the exporter reads pod metadata from the address of
// kubernetes.podMetadata.source: the API server (the default at
// kubernetes.default.svc, or kubernetes.apiServer) or the
// node's kubelet, verified with the service account's CA.
func TestPodMetadataURL(t *testing.T) {
	c := loadChart(t)
	meta := func(kv map[string]any, apiServer string) map[string]any {
		kv["enabled"] = true
		k := map[string]any{"podMetadata": kv}
		if apiServer != "" {
			k["apiServer"] = apiServer
		}
		return map[string]any{"kubernetes": k}
	}
	const pods = "/api/v1/pods?fieldSelector=spec.nodeName%3D$(NODE_NAME)"
	for _, tc := range []struct {
		name string
		vals map[string]any
		url  string
	}{
		{"default", meta(map[string]any{}, ""), "https://kubernetes.default.svc" + pods},
		{"API server address", meta(map[string]any{}, "https://10.0.0.1:6443"), "https://10.0.0.1:6443" + pods},
		{"trailing slash", meta(map[string]any{}, "https://api.example:6443/"), "https://api.example:6443" + pods},
		{"kubelet", meta(map[string]any{"source": "kubelet"}, "https://10.0.0.1:6443"), "kubelet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustRender(t, c, tc.vals)
			args := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Args
			if !slices.Contains(args, "--kubernetes.pod-metadata="+tc.url) {
				t.Errorf("args %q lack --kubernetes.pod-metadata=%s", args, tc.url)
			}
			if !slices.Contains(args, "--kubernetes.pod-metadata.ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt") {
				t.Errorf("args %q: pod metadata not verified with the service account's CA", args)
			}
		})
	}
	for _, bad := range []string{"http://10.0.0.1:6443", "https://10.0.0.1:6443/api", "kubernetes.default.svc"} {
		_, err := render(c, meta(map[string]any{}, bad))
		if err == nil || !strings.Contains(err.Error(), "apiServer") {
			t.Errorf("apiServer %q: error %v, want a schema error naming apiServer", bad, err)
		}
	}
}

// TestKubeletAddressEveryFamily: with kubernetes.podMetadata.source
// kubelet, the exporter is given the node's IP (status.hostIP) apart from
// the URL, and starts with it on an IPv4 node and on an IPv6 one, where
// "https://$(NODE_IP):10250/pods" would be no URL.
func TestKubeletAddressEveryFamily(t *testing.T) {
	m := mustRender(t, loadChart(t), map[string]any{"kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true, "source": "kubelet"}}})
	exp := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter")
	for _, want := range []string{"--kubernetes.pod-metadata=kubelet", "--kubernetes.pod-metadata.kubelet-address=$(NODE_IP)"} {
		if !slices.Contains(exp.Args, want) {
			t.Errorf("args %q lack %s", exp.Args, want)
		}
	}
	var fromHostIP bool
	for _, e := range exp.Env {
		fromHostIP = fromHostIP || e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	}
	if !fromHostIP {
		t.Errorf("env %+v: no NODE_IP from status.hostIP", exp.Env)
	}
	for _, nodeIP := range []string{"10.0.0.5", "fd00:10:244::5"} {
		t.Run(nodeIP, func(t *testing.T) {
			// The pod metadata arguments, $(NODE_IP) expanded as the kubelet
			// does, the files the pod mounts left out.
			dir := t.TempDir()
			addr := repo.FreeAddr(t)
			args := []string{"--backend=sim", "--web.listen-address=" + addr, "--kubernetes.pod-resources-socket=" + filepath.Join(dir, "kubelet.sock")}
			for _, a := range exp.Args {
				if strings.HasPrefix(a, "--kubernetes.pod-metadata") && !strings.Contains(a, "-file=") {
					args = append(args, strings.ReplaceAll(a, "$(NODE_IP)", nodeIP))
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, repo.Exporter(t), args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+dir)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			ready := make(chan error, 1)
			go func() { ready <- repo.WaitReady(ctx, "http://"+addr+"/-/ready") }()
			select {
			case err := <-exited:
				t.Fatalf("the exporter with %q exited: %v\n%s", args, err, out)
			case err := <-ready:
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			cmd.Process.Kill()
			<-exited
		})
	}
}

// TestBuiltinEviction: tuner.rebalanceHook.command builtin:kubernetes-evict
// makes the exporter evict pods itself through kubernetes.apiServer, with
// the service account's token (mounted) and RBAC pods get and
// pods/eviction create; in
// recommend the flag is passed but nothing is granted.
func TestBuiltinEviction(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name, mode, apiServer string
		wantAPI               string
		grant                 bool
	}{
		{"enforce", "enforce", "", "https://kubernetes.default.svc", true},
		{"enforce, API server given", "enforce", "https://10.0.0.1:6443/", "https://10.0.0.1:6443", true},
		{"recommend", "recommend", "", "https://kubernetes.default.svc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := map[string]any{}
			if tc.apiServer != "" {
				k["apiServer"] = tc.apiServer
			}
			m := mustRender(t, c, map[string]any{"kubernetes": k, "tuner": map[string]any{"mode": tc.mode,
				"rebalanceHook": map[string]any{"command": "builtin:kubernetes-evict", "evictPods": true}}})
			pod := m.daemonSets[0].Spec.Template.Spec
			args := container(t, pod.Containers, "exporter").Args
			for _, a := range []string{"--tuner.rebalance-hook=builtin:kubernetes-evict", "--tuner.rebalance-hook.kubernetes-api-server=" + tc.wantAPI} {
				if !slices.Contains(args, a) {
					t.Errorf("args %q lack %s", args, a)
				}
			}
			grants := func(resource, verb string) bool {
				return len(m.clusterRoles) == 1 && slices.ContainsFunc(m.clusterRoles[0].Rules, func(r rbacv1.PolicyRule) bool {
					return slices.Equal(r.Resources, []string{resource}) && slices.Equal(r.Verbs, []string{verb})
				})
			}
			granted := grants("pods/eviction", "create") && grants("pods", "get")
			token := pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken
			if granted != tc.grant || token != tc.grant {
				t.Errorf("pods/eviction create and pods get granted %v, token mounted %v; want %v", granted, token, tc.grant)
			}
		})
	}
}

// TestServiceAccountName: with serviceAccount.create=false the pods run
// as serviceAccount.name, which the RBAC binds; without a name, as the
// namespace's default account, which gets no RBAC (a refusal row of
// TestRejectsBadCombinations where the chart would need it).
func TestServiceAccountName(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		vals    map[string]any
		account string
		bound   bool
	}{
		{map[string]any{"serviceAccount": map[string]any{"create": false}}, "default", false},
		{map[string]any{"serviceAccount": map[string]any{"create": false, "name": "gpu-reader"},
			"kubernetes": map[string]any{"podMetadata": map[string]any{"enabled": true}}}, "gpu-reader", true},
	} {
		m := mustRender(t, c, tc.vals)
		if got := m.daemonSets[0].Spec.Template.Spec.ServiceAccountName; got != tc.account {
			t.Errorf("values %v: service account %q, want %q", tc.vals, got, tc.account)
		}
		bound := len(m.bindings) == 1 && len(m.bindings[0].Subjects) == 1 && m.bindings[0].Subjects[0].Name == tc.account
		if bound != tc.bound || len(m.serviceAccounts) != 0 {
			t.Errorf("values %v: bindings %+v (want one to %s: %v), service accounts %d (want none)", tc.vals, m.bindings, tc.account, tc.bound, len(m.serviceAccounts))
		}
	}
}

// TestKubeletPodsGrant: pod metadata from the kubelet is granted
// nodes/pods get alone by default (the kubelet's fine-grained
// authorization, Kubernetes 1.33 and later), or with kubeletSubresource
// proxy nodes/proxy get, which also reaches every kubelet's exec, attach
// and port-forward (a WebSocket upgrade is a GET), and nothing else; the
// value takes only those two.
func TestKubeletPodsGrant(t *testing.T) {
	c := loadChart(t)
	kubelet := func(sub string) map[string]any {
		meta := map[string]any{"enabled": true, "source": "kubelet"}
		if sub != "" {
			meta["kubeletSubresource"] = sub
		}
		return map[string]any{"kubernetes": map[string]any{"podMetadata": meta}}
	}
	for _, tc := range []struct{ sub, want string }{
		{"", "nodes/pods"},
		{"proxy", "nodes/proxy"},
		{"pods", "nodes/pods"},
	} {
		m := mustRender(t, c, kubelet(tc.sub))
		if len(m.clusterRoles) != 1 {
			t.Fatalf("kubeletSubresource %q: %d ClusterRoles", tc.sub, len(m.clusterRoles))
		}
		want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{tc.want}, Verbs: []string{"get"}}}
		if got := m.clusterRoles[0].Rules; !slices.EqualFunc(got, want, func(a, b rbacv1.PolicyRule) bool {
			return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs)
		}) {
			t.Errorf("kubeletSubresource %q: rules %+v, want %+v", tc.sub, got, want)
		}
	}
	for _, bad := range []string{"nodes/pods", "all"} {
		if _, err := render(c, kubelet(bad)); err == nil || !strings.Contains(err.Error(), "kubeletSubresource") {
			t.Errorf("kubeletSubresource %q: error %v, want a schema error naming it", bad, err)
		}
	}
}
