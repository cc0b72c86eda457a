package gpu

// TenantClass is a tenant's service class, from the tenants file; it is
// the class label of the per-tenant metrics.
type TenantClass string

// Tenant classes. ClassBestEffort is the class of a tenant, not the vGPU
// scheduler policy or the tuner policy of the same spelling.
const (
	ClassLatency    TenantClass = "latency"
	ClassBatch      TenantClass = "batch"
	ClassBestEffort TenantClass = "best-effort"
)
