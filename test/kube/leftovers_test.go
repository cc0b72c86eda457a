//go:build kube

package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// What a namespace holds before anything is installed in it.
var namespaceDefaults = []string{"configmaps/kube-root-ca.crt", "serviceaccounts/default"}

// checkNothingLeft fails the test when, after helm uninstall, any object
// of any listable type is labelled as the release's anywhere, or any
// object (events aside) other than a new namespace's defaults is left in
// the release's namespace. Objects removed by the garbage collector
// (pods, endpoints) are given a while to go.
func (c *cluster) checkNothingLeft(ctx context.Context) {
	t := c.t
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(c.rest)
	lists, err := c.client.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	type kind struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}
	var kinds []kind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") || r.Name == "events" {
				continue
			}
			kinds = append(kinds, kind{gv.WithResource(r.Name), r.Namespaced})
		}
	}
	err = poll(2*time.Minute, 2*time.Second, func() (bool, string, error) {
		var left []string
		for _, k := range kinds {
			objs, err := dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
			if err != nil {
				return false, "", fmt.Errorf("list %s: %w", k.gvr, err)
			}
			for _, o := range objs.Items {
				left = append(left, fmt.Sprintf("%s %s/%s", k.gvr.Resource, o.GetNamespace(), o.GetName()))
			}
			if !k.namespaced {
				continue
			}
			objs, err = dyn.Resource(k.gvr).Namespace(releaseNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", fmt.Errorf("list %s in %s: %w", k.gvr, releaseNS, err)
			}
			for _, o := range objs.Items {
				if id := k.gvr.Resource + "/" + o.GetName(); !slices.Contains(namespaceDefaults, id) {
					left = append(left, fmt.Sprintf("%s %s/%s", k.gvr.Resource, releaseNS, o.GetName()))
				}
			}
		}
		slices.Sort(left)
		left = slices.Compact(left)
		return len(left) == 0, strings.Join(left, ", "), nil
	})
	if err != nil {
		t.Fatalf("helm uninstall left objects behind: %v", err)
	}
}
