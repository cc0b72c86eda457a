//go:build kube

package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// The namespace and release name every values example is rendered for;
// nothing is created in it but the namespace itself.
const (
	examplesNS      = "vgpu-examples"
	examplesRelease = "example"
)

// A copy of the chart's defaults broken twice, so that the dry run is seen
// to refuse what it must: an unknown field of a built-in type (the pod's
// security context, in the DaemonSet) and one of a CRD-backed object (the
// ServiceMonitor's TLS settings). Each is a typo a user could make.
var brokenValues = []struct{ set, kind, field string }{
	{`podSecurityContext={"runAsUsr":0}`, "DaemonSet", "runAsUsr"},
	{`serviceMonitor.tlsConfig={"insecureSkipVerfy":true}`, "ServiceMonitor", "insecureSkipVerfy"},
}

// dryRunExamples renders every documented values file of the chart (its
// defaults and examples/*.yaml, the files deploy/helmtest lints) with
// `helm template` for this cluster (its version and API versions, as
// helm reads them on an install: the prometheus-operator CRDs are served,
// so ServiceMonitor and PrometheusRule are rendered), and applies each object server-side with
// dryRun=All and fieldValidation=Strict: an unknown or duplicated field, a
// wrong type or a value a schema refuses (a CRD's included) fails the
// test. The broken copy of the defaults (brokenValues) must be refused,
// on exactly the objects and fields it breaks.
func (c *cluster) dryRunExamples(ctx context.Context, h *helm) {
	t := c.t
	t.Helper()
	nss := c.client.CoreV1().Namespaces()
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: examplesNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := nss.Delete(ctx, examplesNS, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", examplesNS, err)
		}
	}()
	d := &dryRunner{
		dyn:     dynamic.NewForConfigOrDie(c.rest),
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.client.Discovery())),
		answers: map[string]error{},
	}

	files, err := filepath.Glob(filepath.Join(h.chart, "examples", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("examples/*.yaml: %v, %d files (want at least 3)", err, len(files))
	}
	sets := [][]string{nil} // the defaults
	for _, f := range files {
		sets = append(sets, []string{"-f", f})
	}
	var broken []string
	for _, b := range brokenValues {
		broken = append(broken, "--set-json", b.set)
	}
	manifests := h.templates(ctx, c.capabilities(), append(sets, broken)...)
	for i, args := range sets {
		name := "defaults"
		if len(args) > 0 {
			name = "examples/" + filepath.Base(args[1])
		}
		objs := d.apply(ctx, t, manifests[i])
		var kinds []string
		accepted := 0
		for _, o := range objs {
			kinds = append(kinds, o.kind)
			if o.err == nil {
				accepted++
			} else {
				t.Errorf("%s: %s %s refused by the server-side dry run (strict field validation): %v", name, o.kind, o.name, o.err)
			}
		}
		if name == "defaults" {
			for _, k := range []string{"DaemonSet", "ServiceMonitor", "PrometheusRule"} {
				if !slices.Contains(kinds, k) {
					t.Errorf("defaults: no %s rendered for this cluster (rendered %v)", k, kinds)
				}
			}
		}
		sort.Strings(kinds)
		t.Logf("dry run, strict: %s: %d of %d objects accepted (%s)", name, accepted, len(objs), strings.Join(slices.Compact(kinds), ", "))
	}
	t.Logf("dry run, strict: %d distinct objects sent", len(d.answers))
	if t.Failed() {
		t.FailNow() // every example reported; no cluster time spent past them
	}

	refused := map[string]bool{}
	for _, o := range d.apply(ctx, t, manifests[len(sets)]) {
		refused[o.kind] = o.err != nil
		want := ""
		for _, b := range brokenValues {
			if b.kind == o.kind {
				want = b.field
			}
		}
		switch {
		case want == "" && o.err != nil:
			t.Errorf("broken defaults: %s %s, which is not broken, refused: %v", o.kind, o.name, o.err)
		case want != "" && o.err == nil:
			t.Errorf("broken defaults: %s %s with the unknown field %q accepted by the strict dry run", o.kind, o.name, want)
		case want != "" && !strings.Contains(o.err.Error(), want):
			t.Errorf("broken defaults: %s %s refused, but not for its unknown field %q: %v", o.kind, o.name, want, o.err)
		case want != "":
			t.Logf("dry run, strict: broken defaults: %s %s refused: %v", o.kind, o.name, o.err)
		}
	}
	for _, b := range brokenValues {
		if _, ok := refused[b.kind]; !ok {
			t.Errorf("broken defaults: no %s rendered, so its unknown field %q went unchecked", b.kind, b.field)
		}
	}
}

// capabilities are the helm template arguments that describe this
// cluster as helm sees it on an install (its GetVersionSet): the server's
// version, and every group/version it serves with every group/version/Kind.
// Given them, helm renders without a round of discovery of its own.
func (c *cluster) capabilities() []string {
	t := c.t
	t.Helper()
	v, err := c.client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	groups, resources, err := c.client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var versions []string
	for _, g := range groups {
		for _, gv := range g.Versions {
			versions = append(versions, gv.GroupVersion)
		}
	}
	for _, r := range resources {
		for _, res := range r.APIResources {
			versions = append(versions, r.GroupVersion+"/"+res.Kind)
		}
	}
	slices.Sort(versions)
	return []string{"--kube-version", v.GitVersion, "--api-versions", strings.Join(slices.Compact(versions), ",")}
}

// templates renders the chart as release examplesRelease of examplesNS
// once for each set of values arguments, all at once, for the cluster
// that caps describe, and returns the manifests in order.
func (h *helm) templates(ctx context.Context, caps []string, sets ...[]string) []string {
	t := h.c.t
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out := make([]string, len(sets))
	errs := make([]error, len(sets))
	var wg sync.WaitGroup
	for i, values := range sets {
		wg.Go(func() {
			args := append(append([]string{"template", examplesRelease, h.chart, "-n", examplesNS}, caps...), values...)
			cmd := exec.CommandContext(cctx, h.bin, args...)
			cmd.Dir = repoRoot()
			cmd.Env = append(os.Environ(), h.env()...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
			}
			out[i] = stdout.String()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// dryRunner applies objects with a server-side dry run.
type dryRunner struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// The answer to each object sent, by its YAML: examples render many
	// objects alike (dashboards, rules), each sent once.
	answers map[string]error
}

// applied is one object of a manifest and the server's answer.
type applied struct {
	kind, name string
	err        error
}

// apply sends every object of manifest, as the YAML helm rendered (so that
// the server also sees a duplicated key), as a server-side apply with
// dryRun=All and fieldValidation=Strict, and returns the answers in order.
func (d *dryRunner) apply(ctx context.Context, t *testing.T, manifest string) []applied {
	t.Helper()
	var out []applied
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("manifest: %v\n%s", err, doc)
		}
		if len(obj.Object) == 0 {
			continue // a template that rendered nothing
		}
		gvk := obj.GroupVersionKind()
		if err, ok := d.answers[string(doc)]; ok {
			out = append(out, applied{gvk.Kind, obj.GetName(), err})
			continue
		}
		m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			out = append(out, applied{gvk.Kind, obj.GetName(), fmt.Errorf("not served by this cluster: %w", err)})
			continue
		}
		res := d.dyn.Resource(m.Resource)
		var ri dynamic.ResourceInterface = res
		if m.Scope.Name() == "namespace" {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = examplesNS
			}
			ri = res.Namespace(ns)
		}
		force := true
		_, err = ri.Patch(ctx, obj.GetName(), types.ApplyYAMLPatchType, doc, metav1.PatchOptions{
			DryRun:          []string{metav1.DryRunAll},
			FieldValidation: metav1.FieldValidationStrict,
			FieldManager:    "vgpu-kube-test",
			Force:           &force,
		})
		d.answers[string(doc)] = err
		out = append(out, applied{gvk.Kind, obj.GetName(), err})
	}
	return out
}
