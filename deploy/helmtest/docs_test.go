package helmtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"

	"github.com/vgpu-exporter/vgpu_exporter/deploy/internal/repo"
)

// deployDoc is docs/deploy.md's text after heading.
func deployDoc(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repo.Root(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/deploy.md has no %q", strings.TrimSpace(heading))
	}
	return sec
}

// tryIt is the code block of docs/deploy.md's "Try it on any cluster".
func tryIt(t *testing.T) []string {
	t.Helper()
	_, block, _ := strings.Cut(deployDoc(t, "### Try it on any cluster\n"), "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	return strings.Split(strings.TrimSpace(block), "\n")
}

var (
	helmInstallRE = regexp.MustCompile(`^helm install (\S+) (\S+) -n (\S+) --create-namespace((?: --set \S+)*)$`)
	rolloutRE     = regexp.MustCompile(`^kubectl -n (\S+) rollout status daemonset/(\S+)$`)
	proxyRE       = regexp.MustCompile(`^kubectl get --raw /api/v1/namespaces/([^/]+)/services/([^/:]+):([^/]+)/proxy(/\S+)$`)
)

// TestTryItOnAnyCluster renders the chart as docs/deploy.md's three
// commands install it, on a cluster without the Prometheus Operator, and
// checks what the section says: the DaemonSet and Service the other two
// commands name, every node (no nodeSelector), no added capability, a
// read-only root with no writable /tmp, notes that repeat the two checks; then
// runs the exporter with the rendered arguments and reads the metrics the
// section names.
func TestTryItOnAnyCluster(t *testing.T) {
	cmds := tryIt(t)
	if len(cmds) != 3 {
		t.Fatalf("%d commands, want 3: %q", len(cmds), cmds)
	}
	in := helmInstallRE.FindStringSubmatch(cmds[0])
	ro := rolloutRE.FindStringSubmatch(cmds[1])
	px := proxyRE.FindStringSubmatch(cmds[2])
	if in == nil || ro == nil || px == nil {
		t.Fatalf("commands %q not of the forms %v, %v, %v", cmds, helmInstallRE, rolloutRE, proxyRE)
	}
	release, chartPath, ns := in[1], in[2], in[3]
	if chartPath != "deploy/helm/vgpu-exporter" {
		t.Errorf("installs %s, not the chart", chartPath)
	}
	vals := map[string]any{}
	for _, set := range strings.Fields(strings.ReplaceAll(in[4], "--set", "")) {
		if err := strvals.ParseInto(set, vals); err != nil {
			t.Fatal(err)
		}
	}
	c := loadChart(t)
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: release, Namespace: ns, Revision: 1, IsInstall: true}, capabilities(false))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := engine.Engine{Strict: true}.Render(c, rv)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.serviceMonitors)+len(m.rules) != 0 {
		t.Error("a ServiceMonitor or PrometheusRule on a cluster without the Prometheus Operator")
	}
	ds := m.daemonSets[0]
	if len(m.daemonSets) != 1 || ro[1] != ns || ro[2] != ds.Name || ds.Namespace != ns {
		t.Errorf("%q waits for daemonset %s/%s; the chart makes %s/%s", cmds[1], ro[1], ro[2], ds.Namespace, ds.Name)
	}
	svc := m.services[0]
	if px[1] != ns || px[2] != svc.Name || px[3] != svc.Spec.Ports[0].Name || svc.Namespace != ns {
		t.Errorf("%q reads service %s/%s port %s; the chart makes %s/%s port %s", cmds[2], px[1], px[2], px[3], svc.Namespace, svc.Name, svc.Spec.Ports[0].Name)
	}
	pod := ds.Spec.Template.Spec
	exp := container(t, pod.Containers, "exporter")
	if len(pod.NodeSelector) != 0 || len(exp.SecurityContext.Capabilities.Add) != 0 || !slices.Contains(exp.Args, "--backend=sim") {
		t.Errorf("nodeSelector %v, capabilities added %v, args %q; want every node, none, --backend=sim", pod.NodeSelector, exp.SecurityContext.Capabilities.Add, exp.Args)
	}
	notes := rendered["vgpu-exporter/templates/NOTES.txt"]
	for _, cmd := range cmds[1:] {
		if !strings.Contains(notes, cmd) {
			t.Errorf("install notes lack %q:\n%s", cmd, notes)
		}
	}

	// The exporter with the DaemonSet's arguments (on a free port, and no
	// temporary directory: TMPDIR names none, as the pod has no writable
	// /tmp).
	addr := repo.FreeAddr(t)
	args := slices.Clone(exp.Args)
	for i, a := range args {
		if strings.HasPrefix(a, "--web.listen-address=") {
			args[i] = "--web.listen-address=" + addr
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, repo.Exporter(t), args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(t.TempDir(), "absent"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	base := "http://" + addr
	if err := repo.WaitReady(ctx, base+"/-/ready"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// SM activity is a rate: it needs two samples (--sample.interval apart).
	var body string
	for _, want := range []string{"vgpu_gpu_info{", "vgpu_tenant_sm_active_ratio{"} {
		for !strings.Contains(body, want) && ctx.Err() == nil {
			resp, err := http.Get(base + px[4])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if !strings.Contains(body, want) {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if !strings.Contains(body, want) {
			t.Errorf("%s lacks %s:\n%s", px[4], want, out)
		}
	}
}

// TestResourcesDocumented: docs/deploy.md's "Resources" states the
// exporter's CPU request and memory request and limit the chart renders
// by default.
func TestResourcesDocumented(t *testing.T) {
	m := mustRender(t, loadChart(t), nil)
	if len(m.daemonSets) == 0 {
		t.Fatal("no DaemonSet rendered")
	}
	res := container(t, m.daemonSets[0].Spec.Template.Spec.Containers, "exporter").Resources
	sec, _, _ := strings.Cut(deployDoc(t, "\n## Resources\n"), "\n## ")
	sec = strings.Join(strings.Fields(sec), " ")
	const mib = 1 << 20
	for _, want := range []string{
		fmt.Sprintf("requests %s CPU and %d MiB", res.Requests.Cpu(), res.Requests.Memory().Value()/mib),
		fmt.Sprintf("limits memory to %d MiB", res.Limits.Memory().Value()/mib),
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("docs/deploy.md's Resources does not say %q, what the chart renders", want)
		}
	}
}
