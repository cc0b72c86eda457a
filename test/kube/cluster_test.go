//go:build kube

package kube

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The node and its pod network: a bridge with no route out, whose
// address is the node's. The kubelet and the API server (which the
// exporter's pods reach for pod metadata) listen there; every other
// listener is on 127.0.0.1.
const (
	nodeName   = "vgpu-kube"
	bridgeName = "vgpukube0"
	bridgeCIDR = "10.213.77.1/24"
	nodeIP     = "10.213.77.1"
	podSubnet  = "10.213.77.0/24"
	// The kubelet's device plugin directory, fixed in the kubelet whatever
	// its root directory.
	devicePluginDir = "/var/lib/kubelet/device-plugins"
)

// cluster is a single-node Kubernetes cluster under dir, made of the
// binaries in bin, Debian's etcd and containerd.
type cluster struct {
	t          *testing.T
	dir, bin   string
	procs      []*proc
	kubeconfig string
	client     *kubernetes.Clientset
	rest       *rest.Config
	ctrSock    string
}

func (c *cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

// startProc starts a component; stop stops them all in reverse order.
func (c *cluster) startProc(name string, nice bool, path string, args ...string) *proc {
	c.t.Helper()
	p, err := start(c.path("logs"), name, nice, nil, path, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.procs = append(c.procs, p)
	return p
}

func (c *cluster) proc(name string) *proc {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// up brings the cluster up: PKI, bridge, etcd, API server, controller
// manager, scheduler, containerd and kubelet, each waited for. Cleanup
// (registered first) tears everything down even when a step fails.
func up(t *testing.T, bin string) *cluster {
	dir, err := os.MkdirTemp("", "vgpu-kube-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir, bin: bin}
	t.Cleanup(c.down)
	for _, d := range []string{"logs", "etcd", "containerd", "cni/net.d", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	step := func(what string) { t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), what) }

	// PKI: the CA signs every serving and client certificate.
	p, err := newPKI(c.path("pki"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(kp keyPair, err error) keyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	apiCert := must(p.issue("apiserver", "kube-apiserver", nil, nodeIP, "127.0.0.1", "10.96.0.1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
	apiKubelet := must(p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}))
	admin := must(p.issue("admin", "admin", []string{"system:masters"}))
	kcm := must(p.issue("controller-manager", "system:kube-controller-manager", nil))
	sched := must(p.issue("scheduler", "system:kube-scheduler", nil))
	kubeletClient := must(p.issue("kubelet-client", "system:node:"+nodeName, []string{"system:nodes"}))
	kubeletServing := must(p.issue("kubelet-serving", nodeName, nil, nodeIP, "127.0.0.1", nodeName))
	if err := p.signingKey("sa"); err != nil {
		t.Fatal(err)
	}
	apiPort := freePort(t)
	// On the bridge's address, which the pods reach too.
	server := "https://" + nodeIP + ":" + strconv.Itoa(apiPort)
	kc := func(name string, kp keyPair) string {
		path, err := p.kubeconfig(name, server, kp)
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	c.kubeconfig = kc("admin", admin)

	// The pod network's bridge, made before the kubelet, which takes its
	// address as the node's; the CNI bridge plugin finds it there.
	_, _ = run(context.Background(), "", nil, "ip", "link", "del", bridgeName) // a leftover of a killed run
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeCIDR, "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if _, err := run(context.Background(), "", nil, "ip", args...); err != nil {
			t.Fatal(err)
		}
	}

	etcdPort, peerPort := freePort(t), freePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd := c.startProc("etcd", false, "etcd", "--name=test", "--data-dir="+c.path("etcd", "data"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=test="+peerURL)
	c.waitHTTP(etcd, etcdURL+"/health", 30*time.Second)
	step("etcd up")

	api := c.startProc("kube-apiserver", true, filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+nodeIP, "--advertise-address="+nodeIP, "--secure-port="+strconv.Itoa(apiPort),
		"--endpoint-reconciler-type=none",
		"--tls-cert-file="+apiCert.cert, "--tls-private-key-file="+apiCert.key,
		"--client-ca-file="+p.path("ca.crt"),
		"--service-account-key-file="+p.path("sa.pub"), "--service-account-signing-key-file="+p.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/12",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+apiKubelet.cert, "--kubelet-client-key="+apiKubelet.key,
		"--kubelet-certificate-authority="+p.path("ca.crt"), "--kubelet-preferred-address-types=InternalIP",
		"--profiling=false")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WarningHandler = rest.NoWarnings{}
	c.rest = cfg
	c.client = kubernetes.NewForConfigOrDie(cfg)
	if err := poll(3*time.Minute, time.Second, func() (bool, string, error) {
		if api.exited() {
			return false, "", fmt.Errorf("kube-apiserver exited:\n%s", api.tail(30))
		}
		body, err := c.client.RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err != nil {
			return false, fmt.Sprintf("%v %s", err, body), nil
		}
		return true, "", nil
	}); err != nil {
		t.Fatalf("kube-apiserver not ready: %v", err)
	}
	step("kube-apiserver ready")

	c.startProc("kube-controller-manager", true, filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+kc("controller-manager", kcm),
		"--authentication-kubeconfig="+p.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+p.path("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(freePort(t)), "--leader-elect=false",
		"--service-account-private-key-file="+p.path("sa.key"), "--root-ca-file="+p.path("ca.crt"),
		"--cluster-signing-cert-file="+p.path("ca.crt"), "--cluster-signing-key-file="+p.path("ca.key"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=10.96.0.0/12",
		"--controllers=*")
	c.startProc("kube-scheduler", true, filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+kc("scheduler", sched),
		"--authentication-kubeconfig="+p.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+p.path("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(freePort(t)), "--leader-elect=false")
	step("kube-controller-manager and kube-scheduler started")

	c.ctrSock = c.path("containerd", "containerd.sock")
	c.writeFile("containerd/config.toml", containerdConfig(c.dir))
	c.writeFile("cni/net.d/10-vgpu-kube.conflist", cniConfig(c.dir))
	ctrd := c.startProc("containerd", false, "containerd", "--config="+c.path("containerd", "config.toml"))
	if err := poll(30*time.Second, 500*time.Millisecond, func() (bool, string, error) {
		if ctrd.exited() {
			return false, "", fmt.Errorf("containerd exited:\n%s", ctrd.tail(30))
		}
		out, err := c.ctr("version")
		return err == nil, out, nil
	}); err != nil {
		t.Fatalf("containerd: %v", err)
	}
	step("containerd up")

	c.writeFile("kubelet/config.yaml", kubeletConfig(c.dir, p, kubeletServing))
	kubelet := c.startProc("kubelet", true, filepath.Join(bin, "kubelet"),
		"--config="+c.path("kubelet", "config.yaml"),
		"--kubeconfig="+kc("kubelet", kubeletClient),
		"--root-dir="+c.path("kubelet", "root"),
		"--hostname-override="+nodeName, "--node-ip="+nodeIP,
		"--v=1")
	if err := poll(2*time.Minute, time.Second, func() (bool, string, error) {
		if kubelet.exited() {
			return false, "", fmt.Errorf("kubelet exited:\n%s", kubelet.tail(30))
		}
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, cond.Message, nil
			}
		}
		return false, "no Ready condition", nil
	}); err != nil {
		t.Fatalf("node %s not Ready: %v\nkubelet log:\n%s", nodeName, err, kubelet.tail(40))
	}
	step("node Ready")
	return c
}

func (c *cluster) writeFile(rel, content string) {
	c.t.Helper()
	if err := os.WriteFile(c.path(rel), []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// waitHTTP waits until url answers 200.
func (c *cluster) waitHTTP(p *proc, url string, timeout time.Duration) {
	c.t.Helper()
	if err := poll(timeout, 300*time.Millisecond, func() (bool, string, error) {
		if p.exited() {
			return false, "", fmt.Errorf("%s exited:\n%s", p.name, p.tail(30))
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	}); err != nil {
		c.t.Fatalf("%s: %v", p.name, err)
	}
}

// ctr runs containerd's client against the cluster's containerd, in the
// namespace of the kubelet's containers.
func (c *cluster) ctr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return run(ctx, "", nil, "ctr", append([]string{"--address", c.ctrSock, "--namespace", "k8s.io"}, args...)...)
}

// down stops everything the cluster started, by PID, and removes what
// it left: the pods are deleted while the kubelet still runs (it stops
// their containers and releases their network), then the components stop
// in reverse order; containerd's remaining tasks are killed before it
// stops; mounts under dir, the bridge, the kubelet's cgroups and its device
// plugin sockets go last.
func (c *cluster) down() {
	t := c.t
	if t.Failed() {
		for _, p := range c.procs {
			t.Logf("--- %s log (last lines):\n%s", p.name, p.tail(25))
		}
	}
	if os.Getenv("VGPU_KUBE_KEEP") != "" {
		t.Logf("VGPU_KUBE_KEEP set: cluster left running in %s", c.dir)
		return
	}
	if c.client != nil && c.proc("kubelet") != nil && !c.proc("kubelet").exited() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		c.deleteAllPods(ctx)
		cancel()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.name == "containerd" {
			c.killTasks()
		}
		p.stop(20 * time.Second)
	}
	c.killShims()
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		var mounts []string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], c.dir+"/") {
				mounts = append(mounts, f[1])
			}
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_, _ = run(context.Background(), "", nil, "umount", "-l", mounts[i])
		}
	}
	_, _ = run(context.Background(), "", nil, "ip", "link", "del", bridgeName)
	removeCgroups()
	for _, f := range []string{"kubelet.sock", "kubelet_internal_checkpoint"} {
		_ = os.Remove(filepath.Join(devicePluginDir, f))
	}
	_ = os.Remove(devicePluginDir)
	_ = os.Remove(filepath.Dir(devicePluginDir))
	// What runc and the CNI plugins keep outside containerd's directories
	// whatever its config says: the cached results of this network, and
	// directories left empty.
	results, _ := filepath.Glob("/var/lib/cni/results/vgpu-kube-*")
	for _, f := range results {
		_ = os.Remove(f)
	}
	for _, d := range []string{"/run/containerd/runc/k8s.io", "/run/containerd/runc", "/run/containerd/s",
		"/run/containerd", "/var/lib/cni/results", "/var/lib/cni"} {
		_ = os.Remove(d) // only when empty
	}
	var err error
	for range 10 {
		if err = os.RemoveAll(c.dir); err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Logf("could not remove %s: %v", c.dir, err)
	}
}

// deleteAllPods deletes the workloads and pods of every namespace and
// waits until the kubelet has stopped them.
func (c *cluster) deleteAllPods(ctx context.Context) {
	nss, err := c.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	zero := int64(0)
	for _, ns := range nss.Items {
		apps := c.client.AppsV1()
		_ = apps.DaemonSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = apps.Deployments(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = apps.ReplicaSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = c.client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	_ = poll(60*time.Second, time.Second, func() (bool, string, error) {
		pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods left", len(pods.Items)), nil
	})
}

// killTasks kills the containers containerd still runs.
func (c *cluster) killTasks() {
	out, err := c.ctr("tasks", "ls", "-q")
	if err != nil {
		return
	}
	ids := strings.Fields(out)
	for _, id := range ids {
		_, _ = c.ctr("tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range ids {
		_, _ = c.ctr("tasks", "delete", "-f", id)
	}
}

// killShims kills the containerd shims of this cluster that outlived
// containerd (a shim runs detached, naming containerd's socket in its
// command line), by PID.
func (c *cluster) killShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") &&
			strings.Contains(string(cmdline), c.ctrSock) {
			if pr, err := os.FindProcess(pid); err == nil {
				_ = pr.Kill()
			}
		}
	}
}

// removeCgroups removes the kubelet's pod cgroups (empty once the pods
// are gone), deepest first.
func removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if d := "/sys/fs/cgroup/kubepods"; dirExists(d) {
		roots = append(roots, d)
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
