// Recording rules: the SLO burn rates the alerts read, and the aggregates
// per tenant, per cluster and per sharing mode that fleet dashboards read
// instead of raw per-GPU series.
{
  local c = self._config,
  local by = std.format('%s, tenant', c.clusterLabel),
  local sel = c.vgpuExporterSelector,
  // The labels that identify one GPU of one exporter: its UUID, and its
  // index, since GPUs NVML gave no handle for at start are served down
  // with uuid="" (docs/backends.md): two of them on one host would
  // otherwise be one match group, and a join on vgpu_gpu_info would fail
  // as many-to-many for the whole fleet.
  local gpuKey = std.format('%s, job, %s, gpu, uuid', [c.clusterLabel, c.hostLabel]),

  // Every window named by the burn-rate alerts, in order of length.
  local windows = std.uniq(std.sort(
    std.flattenArrays([[a.short, a.long] for a in c.sloBurnRateAlerts]),
    function(w) std.parseInt(std.substr(w, 0, std.length(w) - 1)) * { m: 60, h: 3600, d: 86400 }[std.substr(w, std.length(w) - 1, 1)],
  )),

  // The SLO windows in order of length, for the dashboards.
  sloWindows:: windows,

  prometheusRules+:: {
    groups+: [
      {
        name: 'vgpu-slo.rules',
        rules: [
          {
            // The objective (q) of each tenant's latency SLO, any value:
            // the exporter serves the q label of the target as a number.
            // The strictest where the tenant's hosts disagree.
            record: 'cluster_tenant:vgpu_tenant_slo_objective:ratio',
            expr: std.format('max by (%s) (vgpu_tenant_slo_objective_ratio{%s})', [by, sel]),
          },
        ] + std.flattenArrays([
          local r = c.sloWindowRanges[w];
          [
            {
              // Request-weighted fraction of requests that missed the target;
              // no series (rather than NaN) for a tenant without requests in
              // the window, such as one whose latency source was never read
              // (its counters are served at 0).
              record: 'cluster_tenant:vgpu_tenant_slo_errors:ratio_rate' + w,
              expr: std.format(|||
                sum by (%(by)s) (
                  rate(vgpu_tenant_requests_total{%(sel)s}[%(r)s]) - rate(vgpu_tenant_slo_good_requests_total{%(sel)s}[%(r)s])
                )
                /
                (
                  sum by (%(by)s) (
                    rate(vgpu_tenant_requests_total{%(sel)s}[%(r)s]) and rate(vgpu_tenant_slo_good_requests_total{%(sel)s}[%(r)s])
                  ) > 0
                )
              |||, { by: by, sel: sel, r: r }),
            },
            {
              // How many times faster than allowed the error budget is spent.
              record: 'cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate' + w,
              expr: std.format(|||
                cluster_tenant:vgpu_tenant_slo_errors:ratio_rate%(w)s
                /
                (1 - cluster_tenant:vgpu_tenant_slo_objective:ratio)
              |||, { w: w }),
            },
          ]
          for w in windows
        ]) + [
          {
            record: 'cluster:vgpu_tenants_with_slo:count',
            expr: std.format('count by (%s) (cluster_tenant:vgpu_tenant_slo_objective:ratio)', c.clusterLabel),
          },
          {
            // Tenants spending their error budget faster than it accrues
            // over the last hour; 0 where no tenant with an SLO had requests.
            record: 'cluster:vgpu_tenants_out_of_slo:count',
            expr: std.format(|||
              sum by (%(cluster)s) (cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate1h > bool 1)
              or
              0 * cluster:vgpu_tenants_with_slo:count
            |||, { cluster: c.clusterLabel }),
          },
        ],
      },
      {
        name: 'vgpu-tenant.rules',
        rules: [
          {
            // In GPU-equivalents: a tenant at 0.5 on each of four GPUs is 2.
            // On a MIG instance the tenant's ratio is a fraction of the
            // instance, so it counts for the instance's part of the GPU's
            // SMs: the tenants of a GPU add up to its own SM active ratio.
            // A GPU whose SM count is not served (a model the backend has
            // no figure for) counts the SMs of its instances instead, an
            // approximation (docs/mixin.md).
            record: 'cluster_tenant:vgpu_tenant_sm_active:sum',
            expr: std.format(|||
              sum by (%(by)s, class) (
                vgpu_tenant_sm_active_ratio{%(sel)s, gpu_instance=""}
                or
                vgpu_tenant_sm_active_ratio{%(sel)s, gpu_instance!=""}
                * on (%(key)s, gpu_instance) group_left ()
                (
                  vgpu_mig_streaming_multiprocessors{%(sel)s}
                  / on (%(key)s) group_left ()
                  (
                    vgpu_gpu_streaming_multiprocessors{%(sel)s}
                    or on (%(key)s)
                    sum by (%(key)s) (vgpu_mig_streaming_multiprocessors{%(sel)s})
                  )
                )
              )
            |||, { by: by, sel: sel, key: gpuKey }),
          },
          {
            // In GPU-equivalents of peak HBM bandwidth. A MIG instance has
            // the bandwidth of its memory slices (of the GPU's 8), which the
            // exporter does not serve: its memory size over the GPU's,
            // rounded to eighths, gives them (the driver's reserve makes
            // the plain ratio a few percent off). A GPU whose memory is not
            // served (MIG read without privilege) counts the memory of its
            // instances instead (docs/mixin.md).
            record: 'cluster_tenant:vgpu_tenant_dram_active:sum',
            expr: std.format(|||
              sum by (%(by)s, class) (
                vgpu_tenant_dram_active_ratio{%(sel)s, gpu_instance=""}
                or
                vgpu_tenant_dram_active_ratio{%(sel)s, gpu_instance!=""}
                * on (%(key)s, gpu_instance) group_left ()
                (
                  round(
                    8 * vgpu_mig_memory_total_bytes{%(sel)s}
                    / on (%(key)s) group_left ()
                    (
                      vgpu_gpu_memory_total_bytes{%(sel)s}
                      or on (%(key)s)
                      sum by (%(key)s) (vgpu_mig_memory_total_bytes{%(sel)s})
                    )
                  ) / 8
                )
              )
            |||, { by: by, sel: sel, key: gpuKey }),
          },
          {
            record: 'cluster_tenant:vgpu_tenant_memory_used_bytes:sum',
            expr: std.format('sum by (%s, class) (vgpu_tenant_memory_used_bytes{%s})', [by, sel]),
          },
          {
            record: 'cluster_tenant:vgpu_tenant_context_switches:rate5m',
            expr: std.format('sum by (%s, class) (rate(vgpu_tenant_context_switches_total{%s}[5m]))', [by, sel]),
          },
          {
            // GPUs (or MIG instances) on which the tenant has processes.
            record: 'cluster_tenant:vgpu_tenant_gpus:count',
            expr: std.format('count by (%s, class) (vgpu_tenant_processes{%s} > 0)', [by, sel]),
          },
        ],
      },
      {
        // Metering (docs/metering.md): per cluster and tenant,
        // the rates of the apportioned counters; the energy rate is watts,
        // the GPU-seconds rates are GPUs, the memory rate is bytes held,
        // the cost rate the currency's base unit per second, by currency
        // and component (docs/metering.md, "Cost").
        name: 'vgpu-metering.rules',
        rules: [
          {
            record: std.format('cluster_tenant:vgpu_tenant_%s:rate5m', m),
            expr: std.format('sum by (%s) (rate(vgpu_tenant_%s_total{%s}[5m]))', [by, m, sel]),
          }
          for m in ['energy_joules', 'gpu_used_seconds', 'gpu_reserved_seconds', 'memory_byte_seconds']
        ] + [
          {
            record: 'cluster_tenant:vgpu_tenant_cost:rate5m',
            expr: std.format('sum by (%s, currency, component) (rate(vgpu_tenant_cost_total{%s}[5m]))', [by, sel]),
          },
          {
            record: 'cluster:vgpu_tenant_idle_energy_joules:rate5m',
            expr: std.format('sum by (%s) (rate(vgpu_tenant_idle_energy_joules_total{%s}[5m]))', [c.clusterLabel, sel]),
          },
          {
            // What the GPUs cost that no tenant is charged for.
            record: 'cluster:vgpu_tenant_idle_cost:rate5m',
            expr: std.format('sum by (%s, currency, component) (rate(vgpu_tenant_idle_cost_total{%s}[5m]))', [c.clusterLabel, sel]),
          },
          {
            // Device memory in use that no tenant's process holds: the
            // driver's reserve where the backend counts it, processes NVML
            // does not list. Subtracted per GPU: a GPU whose used memory is
            // not served (MIG read without privilege) is left out rather
            // than its tenants' memory taken from the other GPUs'. A GPU
            // that had no tenant's process since its exporter started has
            // no tenant meter series: all of its used memory is no tenant's.
            record: 'cluster:vgpu_gpu_memory_unattributed_byte_seconds:rate5m',
            expr: std.format(|||
              sum by (%(cluster)s) (
                rate(vgpu_gpu_memory_used_byte_seconds_total{%(sel)s}[5m])
                - on (%(key)s) group_left ()
                (
                  sum by (%(key)s) (rate(vgpu_tenant_memory_byte_seconds_total{%(sel)s}[5m]))
                  or
                  0 * sum by (%(key)s) (rate(vgpu_gpu_memory_used_byte_seconds_total{%(sel)s}[5m]))
                )
              )
            |||, { cluster: c.clusterLabel, sel: sel, key: gpuKey }),
          },
        ],
      },
      {
        name: 'vgpu-fleet.rules',
        rules: [
          {
            record: 'cluster:vgpu_gpus:count',
            expr: std.format('count by (%s) (vgpu_gpu_up{%s})', [c.clusterLabel, sel]),
          },
          {
            record: 'cluster:vgpu_gpus_up:sum',
            expr: std.format('sum by (%s) (vgpu_gpu_up{%s})', [c.clusterLabel, sel]),
          },
          {
            record: 'cluster:vgpu_gpu_power_watts:sum',
            expr: std.format('sum by (%s) (vgpu_gpu_power_watts{%s})', [c.clusterLabel, sel]),
          },
          {
            record: 'cluster:vgpu_gpu_memory_used_bytes:sum',
            expr: std.format('sum by (%s) (vgpu_gpu_memory_used_bytes{%s})', [c.clusterLabel, sel]),
          },
          {
            record: 'cluster:vgpu_gpu_memory_total_bytes:sum',
            expr: std.format('sum by (%s) (vgpu_gpu_memory_total_bytes{%s})', [c.clusterLabel, sel]),
          },
          {
            record: 'cluster_mode:vgpu_gpus:count',
            expr: std.format('count by (%s, mode) (vgpu_gpu_info{%s})', [c.clusterLabel, sel]),
          },
        ] + [
          {
            record: std.format('cluster_mode:vgpu_gpu_%s:avg', m),
            expr: std.format(|||
              avg by (%(cluster)s, mode) (
                vgpu_gpu_%(m)s_ratio{%(sel)s}
                * on (%(key)s) group_left (mode)
                vgpu_gpu_info{%(sel)s}
              )
            |||, { cluster: c.clusterLabel, m: m, sel: sel, key: gpuKey }),
          }
          for m in ['sm_active', 'dram_active', 'utilization']
        ],
      },
    ],
  },
}
