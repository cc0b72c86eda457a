package collector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// podInfoDescs are the tenant collector's pod info series (served only
// while the snapshot has pod info: --kubernetes.pod-info).
type podInfoDescs struct {
	info, dropped *prometheus.Desc
}

func (c *tenantCollector) addPodInfo() {
	c.podInfo.info = c.add("tenant_pod_info", "A container that the kubelet's pod-resources API assigns the GPU (or MIG instance), with the tenant of its pod; always 1. Join on tenant, gpu, uuid and gpu_instance to name a tenant's pods.", "tenant", "gpu", "uuid", "gpu_instance", "namespace", "pod", "container")
	c.podInfo.dropped = c.add("tenant_pod_info_dropped_total", "Container GPU allocations left without a vgpu_tenant_pod_info series since the exporter started because --kubernetes.pod-info.max-series was reached, each counted once when first left out.")
}

func (c *tenantCollector) updatePodInfo(e *emitter, snap *tenant.Snapshot) {
	pi := snap.PodInfo
	if pi == nil {
		return
	}
	e.counter(c.podInfo.dropped, float64(pi.DroppedTotal))
	type key struct{ uuid, gi, ns, pod, container string }
	seen := make(firstSet[key], len(pi.Allocations))
	for _, a := range pi.Allocations {
		if !seen.add(key{a.UUID, a.GPUInstance, a.Namespace, a.Pod, a.Container}) {
			e.fail(fmt.Errorf("pod info of %s/%s container %q on GPU %s instance %q listed twice; later copies skipped", a.Namespace, a.Pod, a.Container, a.UUID, a.GPUInstance))
			continue
		}
		e.gauge(c.podInfo.info, 1, a.Tenant, itoa(a.GPU), a.UUID, a.GPUInstance, a.Namespace, a.Pod, a.Container)
	}
}
