// Grafana dashboards: a fleet overview (reads the recording rules), a
// tenant view, a GPU / MIG view and a tuner view (read the exporter's
// series).
local g = import 'lib/dashboard.libsonnet';
{
  local c = self._config,
  local cl = c.clusterLabel,
  local host = c.hostLabel,
  local sel = c.vgpuExporterSelector,

  local clusterVar = g.queryVariable('cluster', 'Cluster', std.format('label_values(vgpu_gpu_info{%s}, %s)', [sel, cl])),
  local jobVar = g.queryVariable('job', 'Job', std.format('label_values(vgpu_gpu_info{%s, %s=~"$cluster"}, job)', [sel, cl])),
  // Every variable reads only the exporter's series (sel), as the recording
  // rules the overview reads do.
  local hostVar = g.queryVariable('host', 'Host', std.format('label_values(vgpu_gpu_info{%s, %s=~"$cluster", job=~"$job"}, %s)', [sel, cl, host])),
  local gpuVar = g.queryVariable('gpu', 'GPU', std.format('label_values(vgpu_gpu_info{%s, %s=~"$cluster", job=~"$job", %s=~"$host"}, gpu)', [sel, cl, host])),
  local migVar = g.queryVariable('gpu_instance', 'MIG instance', std.format('label_values(vgpu_mig_instance_info{%s, %s=~"$cluster", job=~"$job", %s=~"$host", gpu=~"$gpu"}, gpu_instance)', [sel, cl, host])),
  local tenantVar(hostFilter) = g.queryVariable('tenant', 'Tenant', std.format('label_values(vgpu_tenant_info{%s, %s=~"$cluster"%s}, tenant)', [sel, cl, if hostFilter then std.format(', job=~"$job", %s=~"$host"', host) else ''])),

  // Series filters of the variables.
  local fc = std.format('%s=~"$cluster"', cl),
  local fh = std.format('%s, job=~"$job", %s=~"$host"', [fc, host]),
  local fg = fh + ', gpu=~"$gpu"',
  local ft = fh + ', tenant=~"$tenant"',
  // A chargeback table's row of what no tenant is charged for: q, the
  // idle series' sum, labelled as a tenant.
  local idleRow(q) = std.format('label_replace(%s, "tenant", "idle (no tenant)", "", "")', q),
  // The cost of each tenant (of the component sel selects, '' for all)
  // over range, with the idle cost's row.
  local costWithIdle(sel, range) =
    local c = if sel == '' then '' else ', ' + sel;
    std.format('sum by (tenant, currency) (increase(vgpu_tenant_cost_total{%s%s}[%s])) or %s', [ft, c, range, idleRow(std.format('sum by (currency) (increase(vgpu_tenant_idle_cost_total{%s%s}[%s]))', [fh, c, range]))]),
  local gpuLegend = '{{' + host + '}} GPU {{gpu}}',
  // The series of expr, its q label (a quantile as a fraction, 0.99) also
  // written as a percentile in the label percentile (p99), for the legend:
  // 0.5 -> p50, 0.95 -> p95, 0.999 -> p99.9; any other q as q=<q>.
  local withPercentile(expr) = std.foldl(
    function(e, r) std.format('label_replace(%s, "percentile", "%s", "q", "%s")', [e, r[0], r[1]]),
    [['q=$1', '(.+)'], ['p${1}0', '0[.]([0-9])'], ['p$1', '0[.]([0-9][0-9])'], ['p$1.$2', '0[.]([0-9][0-9])([0-9]+)']],
    expr
  ),
  local hostKey = std.format('%s, job, %s', [cl, host]),
  local gpuKey = hostKey + ', gpu, uuid',
  // The events the counter series s counts in each interval of the graph,
  // whole: its rise at each point of a grid of eventDeltaStep (the scrape
  // interval or less) over its last value one step earlier, a fall (the
  // exporter restarted, the counter started again from 0) counted as the
  // value after it, summed over the grid's points in the interval.
  // last_over_time over 5m, not s offset step: where a restart made a
  // scrape fail, Prometheus marks the series stale and s offset step reads
  // nothing, the counts after the restart lost; the range skips the mark
  // and finds the value before the restart up to 5m back. $__interval is
  // the query's step, so the intervals tile the range and an event counts
  // in one; the grid is shifted by -1ms so that the interval holds the
  // grid's points after its start up to its end whether the range includes
  // its start (Prometheus 2) or not (3). A series' first value (a hardware
  // counter found at 500) counts none. increase() would estimate (one event
  // over four scrapes reads 1.33) and, over $__rate_interval, count an
  // event in each of several intervals.
  local perInterval(s) =
    local rise = std.format('%(s)s - last_over_time(%(s)s[5m] offset %(d)s)', { s: s, d: c.eventDeltaStep });
    std.format('sum_over_time(((%(r)s >= 0) or (%(s)s * 1 and (%(r)s < 0)))[$__interval:%(d)s] offset -1ms)', { r: rise, s: s, d: c.eventDeltaStep }),
  local countNote = " Whole counts: the counter's rise at each reading (every %s) summed over each interval of the graph (the query's step), so that one event reads 1 in one interval and the intervals add up to the range's total. After an exporter's restart the counter's new value counts as risen from 0 (up to 5m without a reading); the events between the reading before a restart and the restart are lost, and a series' first value counts none (a hardware counter first read at 500 counts 0)." % c.eventDeltaStep,
  // The events of the counter series s per interval (perInterval), summed
  // by the labels by ('' keeps each series of s), after the PromQL clause
  // restrict ('and on (...) v': only the series that v matches; '' for all).
  local eventCount(s, by='', restrict='') =
    local n = perInterval(s) + restrict;
    if by == '' then n else std.format('sum by (%s) (%s)', [by, n]),
  // A target of an event panel: eventCount, only the intervals with an
  // event (> 0), legend its legend.
  local eventTarget(s, by, legend, restrict='') = g.target(eventCount(s, by, restrict) + ' > 0', legend),
  // A panel of events per interval (g.events) whose description ends with
  // how they are counted.
  local eventPanel(title, targets, description) = g.events(title, targets, description=description + countNote),
  // Tuner actions by knob and outcome on the hosts of the filter f: every
  // knob x outcome pair is a series, most of them always 0.
  local tunerActions(f, outcomes) = eventTarget(std.format('vgpu_tuner_actions_total{%s, outcome=~"%s"}', [f, outcomes]), 'knob, outcome', '{{knob}} {{outcome}}'),
  local mpsTargetEffective(f, legend) = [
    g.target(std.format('vgpu_tuner_mps_active_threads_target_ratio{%s}', f), legend + ' target'),
    g.target(std.format('vgpu_tuner_mps_active_threads_effective_ratio{%s}', f), legend + ' effective'),
  ],
  // The series metric of each vGPU instance on the GPUs of the filter fg,
  // with the labels labels of its VM (vgpu_vgpu_instance_info).
  local perVM(metric, labels) = std.format('%(m)s{%(f)s} * on (%(key)s, vgpu_instance) group_left (%(l)s) vgpu_vgpu_instance_info{%(f)s}', { m: metric, l: labels, f: fg, key: hostKey + ', uuid' }),
  // The tenant series metric on the GPUs of the filter fg (and the MIG
  // instances of $gpu_instance) as a fraction of the whole GPU: on a MIG
  // instance, a fraction of the instance, times the instance's part of the
  // GPU (part), as the recording rules of rules.libsonnet weigh it.
  local ofGPU(metric, part) = std.format('%(m)s{%(f)s, gpu_instance="", gpu_instance=~"$gpu_instance", tenant=~"$tenant"} or %(m)s{%(f)s, gpu_instance!="", gpu_instance=~"$gpu_instance", tenant=~"$tenant"} * on (%(key)s, gpu_instance) group_left () (%(p)s)', { m: metric, f: fg, key: gpuKey, p: part }),
  // A MIG instance's part of its GPU's SMs (the SMs of the GPU's instances
  // where the GPU's own count is not served).
  local migSMs = std.format('vgpu_mig_streaming_multiprocessors{%(f)s} / on (%(key)s) group_left () (vgpu_gpu_streaming_multiprocessors{%(f)s} or on (%(key)s) sum by (%(key)s) (vgpu_mig_streaming_multiprocessors{%(f)s}))', { f: fg, key: gpuKey }),
  // A MIG instance's part of its GPU's HBM bandwidth: its memory slices
  // (of 8), from its memory over the GPU's rounded to eighths.
  local migSlices = std.format('round(8 * vgpu_mig_memory_total_bytes{%(f)s} / on (%(key)s) group_left () (vgpu_gpu_memory_total_bytes{%(f)s} or on (%(key)s) sum by (%(key)s) (vgpu_mig_memory_total_bytes{%(f)s}))) / 8', { f: fg, key: gpuKey }),
  // A stat's thresholds: green below 1, color from 1.
  local fromOne(color) = [{ color: 'green', value: null }, { color: color, value: 1 }],
  local burnWindows = self.sloWindows,

  grafanaDashboards+:: {
    'vgpu-overview.json': g.dashboard(c, 'vgpu-overview.json', 'vGPU / Fleet overview', 'GPUs, sharing modes, utilization and tenant SLOs across clusters, from the vgpu_exporter recording rules.', [clusterVar, tenantVar(false)], [
      g.row('GPUs'),
      g.stat('GPUs', [g.target(std.format('sum(cluster:vgpu_gpus:count{%s})', fc))]) { w: 4, h: 4 },
      g.stat('GPUs down', [g.target(std.format('sum(cluster:vgpu_gpus:count{%(f)s}) - sum(cluster:vgpu_gpus_up:sum{%(f)s})', { f: fc }))], thresholds=fromOne('red')) { w: 4, h: 4 },
      g.stat('Power', [g.target(std.format('sum(cluster:vgpu_gpu_power_watts:sum{%s})', fc))], 'watt') { w: 4, h: 4 },
      g.stat('Device memory used', [g.target(std.format('sum(cluster:vgpu_gpu_memory_used_bytes:sum{%(f)s}) / sum(cluster:vgpu_gpu_memory_total_bytes:sum{%(f)s})', { f: fc }))], 'percentunit') { w: 4, h: 4 },
      g.stat('Tenants with an SLO', [g.target(std.format('sum(cluster:vgpu_tenants_with_slo:count{%s})', fc))]) { w: 4, h: 4 },
      g.stat('Tenants out of SLO (1h burn > 1)', [g.target(std.format('sum(cluster:vgpu_tenants_out_of_slo:count{%s})', fc))], thresholds=fromOne('red')) { w: 4, h: 4 },
      g.timeseries('GPUs by sharing mode', [g.target(std.format('sum by (mode) (cluster_mode:vgpu_gpus:count{%s})', fc), '{{mode}}')], stack=true) { w: 8 },
      g.timeseries('SM active by sharing mode', [g.target(std.format('avg by (mode) (cluster_mode:vgpu_gpu_sm_active:avg{%s})', fc), '{{mode}}')], 'percentunit') { w: 8 },
      g.timeseries('HBM bandwidth used by sharing mode', [g.target(std.format('avg by (mode) (cluster_mode:vgpu_gpu_dram_active:avg{%s})', fc), '{{mode}}')], 'percentunit') { w: 8 },
      g.row('Tenants'),
      g.timeseries('SM active per tenant (GPU-equivalents)', [g.target(std.format('topk(20, sum by (tenant) (cluster_tenant:vgpu_tenant_sm_active:sum{%s, tenant=~"$tenant"}))', fc), '{{tenant}}')], stack=true),
      g.timeseries('Device memory per tenant', [g.target(std.format('topk(20, sum by (tenant) (cluster_tenant:vgpu_tenant_memory_used_bytes:sum{%s, tenant=~"$tenant"}))', fc), '{{tenant}}')], 'bytes', stack=true),
      g.timeseries('Error budget burn rate over 1h', [g.target(std.format('cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate1h{%s, tenant=~"$tenant"}', fc), '{{%s}} {{tenant}}' % cl)], description='1 spends the budget exactly over the SLO period; the fast-burn page fires above %sx.' % c.sloBurnRateAlerts[0].factor),
      g.table('Error budget left over 3d', [g.target(std.format('1 - cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate3d{%s, tenant=~"$tenant"}', fc))], 'percentunit', description='Share of the error budget of the last 3 days not spent (1 - the 3-day burn rate); "overspent" where the tenant spent all of its budget or more (the value, 0 or below, is kept: Inspect, Data).') {
        fieldConfig+: { defaults+: {
          mappings: [{ type: 'range', options: { to: 0, result: { text: 'overspent', color: 'red', index: 0 } } }],
          thresholds: { mode: 'absolute', steps: [{ color: 'red', value: null }, { color: 'orange', value: 0 }, { color: 'green', value: 0.25 }] },
          custom: { cellOptions: { type: 'color-text' } },
        } },
      },
    ]),

    'vgpu-tenant.json': g.dashboard(c, 'vgpu-tenant.json', 'vGPU / Tenant', "A tenant's usage of each GPU, its latency against its SLO, and its error budget burn rates.", [clusterVar, jobVar, hostVar, tenantVar(true)], [
      g.row('Usage'),
      g.timeseries('SM active per GPU', [g.target(std.format('vgpu_tenant_sm_active_ratio{%s}', ft), '{{tenant}} ' + gpuLegend + ' {{gpu_instance}}')], 'percentunit', description='Fraction of the GPU (or MIG instance) the tenant kept busy; the GPU (or instance) counters split among its tenants as docs/tenants.md explains; the tenants add up to its SM active.'),
      g.timeseries('HBM bandwidth per GPU', [g.target(std.format('vgpu_tenant_dram_active_ratio{%s}', ft), '{{tenant}} ' + gpuLegend + ' {{gpu_instance}}')], 'percentunit'),
      g.timeseries('Device memory', [g.target(std.format('vgpu_tenant_memory_used_bytes{%s}', ft), '{{tenant}} ' + gpuLegend + ' {{gpu_instance}}')], 'bytes') { w: 8 },
      g.timeseries('Processes', [g.target(std.format('vgpu_tenant_processes{%s}', ft), '{{tenant}} ' + gpuLegend + ' {{gpu_instance}}')]) { w: 8 },
      g.timeseries('Context switches', [g.target(std.format('rate(vgpu_tenant_context_switches_total{%s}[$__rate_interval])', ft), '{{tenant}} ' + gpuLegend)], 'ops') { w: 8 },
      g.table('How each figure is obtained', [g.target(std.format('vgpu_tenant_figure_info{%s}', ft))], description="measured: the hardware counted the tenant's own use (the counters of a MIG instance it has alone); apportioned: a GPU's (or a shared MIG instance's) figure split among its tenants by the rule in docs/tenants.md. Served apart, so the series above never change labels.") { w: 24 },
      g.row('Latency SLO'),
      g.timeseries('Latency quantiles and target', [
        g.target(withPercentile(std.format('vgpu_tenant_request_latency_seconds{%s}', ft)), '{{tenant}} {{percentile}}'),
        g.target(withPercentile(std.format('vgpu_tenant_slo_target_seconds{%s}', ft)), '{{tenant}} target ({{percentile}})'),
      ], 's', description="The tenant's request latency quantiles over the SLO window, and its objective: the fraction q of requests (label q, 0.99: p99 in the legend) that must complete within the target."),
      g.timeseries('SLO attainment over the SLO window', [g.target(std.format('vgpu_tenant_slo_attainment_ratio{%s}', ft), '{{tenant}}')], 'percentunit'),
      g.timeseries('Requests', [g.target(std.format('max by (tenant) (rate(vgpu_tenant_requests_total{%s}[$__rate_interval]))', ft), '{{tenant}}')], 'reqps', description="The requests of the tenant's one latency source, read by the exporter of the host it runs on; where several serve them (for up to its SLO window after the tenant moved, on every host it runs on, or on every host with --tenants.latency-sources=all), each serves the same source's counts: the largest, not their sum.") { w: 8 },
      g.timeseries('Error budget burn rate', [
        g.target(std.format('cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate%s{%s, tenant=~"$tenant"}', [w, fc]), '{{tenant}} %s' % w)
        for w in burnWindows
      ], description='Per window; the fast-burn page fires when the 1h and 5m rates are both above %sx.' % c.sloBurnRateAlerts[0].factor) { w: 8 },
      g.timeseries('Latency source up', [g.target(std.format('vgpu_tenant_latency_source_up{%s}', ft), '{{tenant}} {{%s}}' % host)]) { w: 8 },
      g.row('Tuner'),
      g.timeseries('MPS active threads: target and effective', mpsTargetEffective(ft, '{{tenant}} ' + gpuLegend), 'percentunit', description="What the tuner decided for the tenant's MPS clients and what their contexts run with; they differ until the clients restart."),
      // vgpu_tenant_info is served for every tenant of the tenants file,
      // where it runs or not: the hosts are those where it had a process.
      local onTenantHosts = std.format(' and on (%s) max_over_time(vgpu_tenant_processes{%s}[$__interval]) > 0', [hostKey, ft]);
      eventPanel("Tuner actions on the tenant's hosts", [
        eventTarget(std.format('vgpu_tuner_actions_total{%s, outcome!="guarded"}', fh), host + ', knob, outcome', '{{%s}} {{knob}} {{outcome}}' % host, onTenantHosts),
        eventTarget(std.format('vgpu_tuner_reverts_total{%s}', fh), host, '{{%s}} reverts' % host, onTenantHosts),
      ], 'Actions planned by the tuner (guarded ones left out) and its reverts, on the hosts where the tenant had a process in the interval: one bar per interval in which any happened, by knob and outcome; empty while the tuner holds.'),
    ]),

    'vgpu-gpu.json': g.dashboard(c, 'vgpu-gpu.json', 'vGPU / GPU and MIG', "Per GPU and MIG instance: the split of SMs and HBM among tenants, context switches, vGPU instances and their scheduler, clocks, power, throttle reasons, XID errors, NVLink and PCIe health, memory repair, and the exporter's sampling time on each host.", [clusterVar, jobVar, hostVar, gpuVar, migVar, tenantVar(true)], [
      g.row('Activity'),
      g.timeseries('SM active', [g.target(std.format('vgpu_gpu_sm_active_ratio{%s}', fg), gpuLegend)], 'percentunit') { w: 8 },
      g.timeseries('HBM bandwidth used', [g.target(std.format('vgpu_gpu_dram_active_ratio{%s}', fg), gpuLegend)], 'percentunit') { w: 8 },
      g.timeseries('Tensor pipes active', [g.target(std.format('vgpu_gpu_tensor_active_ratio{%s}', fg), gpuLegend)], 'percentunit') { w: 8 },
      g.timeseries('SM active per tenant', [g.target(std.format('sum by (%s, gpu, gpu_instance, tenant) (%s)', [host, ofGPU('vgpu_tenant_sm_active_ratio', migSMs)]), '{{tenant}} ' + gpuLegend + ' {{gpu_instance}}')], 'percentunit', description="Per GPU (or MIG instance), as a fraction of the whole GPU: a tenant's share of a MIG instance weighed by the instance's part of the GPU's SMs, as cluster_tenant:vgpu_tenant_sm_active:sum does. Stacked, the tenants of one GPU add up to its SM active.", stack=true),
      g.timeseries('HBM bandwidth per tenant', [g.target(std.format('sum by (%s, gpu, gpu_instance, tenant) (%s)', [host, ofGPU('vgpu_tenant_dram_active_ratio', migSlices)]), '{{tenant}} ' + gpuLegend + ' {{gpu_instance}}')], 'percentunit', description="Per GPU (or MIG instance), as a fraction of the whole GPU: a tenant's share of a MIG instance weighed by the instance's memory slices (of the GPU's 8), as cluster_tenant:vgpu_tenant_dram_active:sum does. Stacked, the tenants of one GPU add up to its HBM bandwidth used.", stack=true),
      g.timeseries('Device memory per tenant', [g.target(std.format('sum by (tenant) (vgpu_tenant_memory_used_bytes{%s, gpu_instance=~"$gpu_instance", tenant=~"$tenant"})', fg), '{{tenant}}')], 'bytes', stack=true) { w: 8 },
      g.timeseries('Context switches', [
        g.target(std.format('rate(vgpu_gpu_context_switches_total{%s}[$__rate_interval])', fg), gpuLegend),
        g.target(std.format('sum by (tenant) (rate(vgpu_tenant_context_switches_total{%s, tenant=~"$tenant"}[$__rate_interval]))', fg), '{{tenant}}'),
      ], 'ops') { w: 8 },
      g.timeseries('Device memory', [
        g.target(std.format('vgpu_gpu_memory_used_bytes{%s}', fg), gpuLegend + ' used'),
        g.target(std.format('vgpu_gpu_memory_total_bytes{%s}', fg), gpuLegend + ' total'),
      ], 'bytes') { w: 8 },
      g.row('MIG instances'),
      g.timeseries('MIG SM active', [g.target(std.format('vgpu_mig_sm_active_ratio{%s, gpu_instance=~"$gpu_instance"}', fg), gpuLegend + ' GI {{gpu_instance}}')], 'percentunit'),
      g.timeseries('MIG device memory used', [g.target(std.format('vgpu_mig_memory_used_bytes{%s, gpu_instance=~"$gpu_instance"}', fg), gpuLegend + ' GI {{gpu_instance}}')], 'bytes'),
      g.row('vGPU instances'),
      g.timeseries('vGPU SM utilization per VM', [g.target(perVM('vgpu_vgpu_sm_utilization_ratio', 'vm_name, type'), gpuLegend + ' {{vm_name}} ({{type}})')], 'percentunit', description="Fraction of the interval the VM's work ran on the SMs (vGPU hosts only).") { w: 8 },
      g.timeseries('vGPU framebuffer per VM', [
        g.target(perVM('vgpu_vgpu_framebuffer_used_bytes', 'vm_name'), gpuLegend + ' {{vm_name}} used'),
        g.target(perVM('vgpu_vgpu_framebuffer_total_bytes', 'vm_name'), gpuLegend + ' {{vm_name}} size'),
      ], 'bytes') { w: 8 },
      g.timeseries('vGPU scheduler: run and preemption per runlist', [
        g.target(std.format('rate(vgpu_vgpu_scheduler_run_seconds_total{%s}[$__rate_interval])', fg), gpuLegend + ' runlist {{runlist}} run'),
        g.target(std.format('rate(vgpu_vgpu_scheduler_preemption_seconds_total{%s}[$__rate_interval])', fg), gpuLegend + ' runlist {{runlist}} preempted'),
      ], 'percentunit', description='Fraction of time each software runlist ran and was preempted, from the scheduler log.') { w: 8 },
      g.table('vGPU scheduler settings', [
        g.target(std.format('vgpu_vgpu_scheduler_info{%s}', fg)),
        g.target(std.format('vgpu_vgpu_scheduler_timeslice_seconds{%s}', fg)),
        g.target(std.format('vgpu_vgpu_scheduler_arr_enabled{%s}', fg)),
      ], description='Policy, time slice and adaptive round robin of each vGPU host GPU.') { w: 24 },
      g.row('Clocks, power and health'),
      g.timeseries('SM clock', [
        g.target(std.format('vgpu_gpu_sm_clock_hertz{%s}', fg), gpuLegend),
        g.target(std.format('vgpu_gpu_sm_clock_max_hertz{%s}', fg), gpuLegend + ' max'),
      ], 'hertz') { w: 8 },
      g.timeseries('Power', [
        g.target(std.format('vgpu_gpu_power_watts{%s}', fg), gpuLegend),
        g.target(std.format('vgpu_gpu_power_limit_watts{%s}', fg), gpuLegend + ' limit'),
      ], 'watt') { w: 8 },
      g.timeseries('Temperature', [g.target(std.format('vgpu_gpu_temperature_celsius{%s}', fg), gpuLegend)], 'celsius') { w: 8 },
      g.timeseries('Throttle reasons active', [g.target(std.format('vgpu_gpu_clock_event_reason_active{%s, reason!="gpu_idle"} > 0', fg), gpuLegend + ' {{reason}}')], description='Clock event reasons holding the clocks down (idle excluded).'),
      eventPanel('XID errors', [eventTarget(std.format('vgpu_gpu_events_total{%s, kind="xid"}', fg), '', gpuLegend + ' XID {{code}}')], 'XID errors per interval, by code; see docs/runbooks.md for the code classes.'),
      g.row('Interconnect and memory health'),
      g.timeseries('NVLink throughput', [g.target(std.format('sum by (%s, gpu, direction) (rate(vgpu_gpu_nvlink_bytes_total{%s}[$__rate_interval]))', [host, fg]), gpuLegend + ' {{direction}}')], 'Bps', description='Data bytes over all NVLink links of the GPU.') { w: 8 },
      g.timeseries('PCIe throughput', [g.target(std.format('vgpu_gpu_pcie_bytes_per_second{%s}', fg), gpuLegend + ' {{direction}}')], 'Bps', description="The driver's own short-window reading, sampled.") { w: 8 },
      g.timeseries('NVLink links', [g.target(std.format('vgpu_gpu_nvlink_links{%s}', fg), gpuLegend + ' {{state}}')], description='Links up (active) and down (inactive).') { w: 8 },
      eventPanel('NVLink errors and PCIe replays', [
        eventTarget(std.format('vgpu_gpu_nvlink_errors_total{%s}', fg), '', gpuLegend + ' NVLink {{type}}'),
        eventTarget(std.format('vgpu_gpu_pcie_replays_total{%s}', fg), '', gpuLegend + ' PCIe replays'),
      ], 'Per interval; empty on healthy links. See the VGPUNVLinkErrorsRising and VGPUPCIeReplaysRising runbooks.'),
      g.table('Memory repair', [
        g.target(std.format('vgpu_gpu_remapped_rows_total{%s}', fg)),
        g.target(std.format('vgpu_gpu_row_remap_pending{%s}', fg)),
        g.target(std.format('vgpu_gpu_row_remap_failure{%s}', fg)),
        g.target(std.format('vgpu_gpu_retired_pages_total{%s}', fg)),
        g.target(std.format('vgpu_gpu_retired_pages_pending{%s}', fg)),
        g.target(std.format('vgpu_gpu_ecc_errors_total{%s}', fg)),
      ], description='Rows remapped by cause, a remap pending a reset or failed (Ampere and later), pages retired by cause and a retirement pending a reboot (older GPUs), ECC errors by type since the driver loaded.'),
      g.row('Exporter'),
      g.timeseries('Sampling time', [
        g.target(std.format('vgpu_sample_duration_seconds{%s}', fh), '{{%s}} backend' % host),
        g.target(std.format('vgpu_sample_publish_duration_seconds{%s}', fh), '{{%s}} publication' % host),
        g.target(std.format('vgpu_sample_interval_seconds{%s}', fh), '{{%s}} interval' % host),
      ], 's', description="Wall time the host's last sample took, in two parts: the backend's call (vgpu_sample_duration_seconds: NVML, dcgm-exporter) and its publication (vgpu_sample_publish_duration_seconds: the snapshot's build with the tenants' attribution and /proc reads, the /metrics renders), against --sample.interval (vgpu_sample_interval_seconds). A sample whose two parts add up to more than the interval skips the ticks it covers (the next starts at the next whole interval from its start); VGPUExporterSamplingSlow fires once fewer than 90%% of the samples asked for are taken, for %s." % c.alertFor.samplingSlow) { w: 24 },
    ]),
    'vgpu-chargeback.json': g.dashboard(c, 'vgpu-chargeback.json', 'vGPU / Energy and chargeback', "Each tenant's apportioned energy, GPU time used and held, and device memory held, with totals and cost per day and per 30 days; the cost is the exporters' own vgpu_tenant_cost_total, at the prices they are given (docs/metering.md, Cost). Tables export as CSV from the panel menu (Inspect, Data).", [clusterVar, jobVar, hostVar, tenantVar(true)], [
      g.row('Energy and use'),
      g.timeseries('Power per tenant', [
        g.target(std.format('sum by (tenant) (rate(vgpu_tenant_energy_joules_total{%s}[$__rate_interval]))', ft), '{{tenant}}'),
        g.target(std.format('sum(rate(vgpu_tenant_idle_energy_joules_total{%s}[$__rate_interval]))', fh), 'idle (no tenant)'),
      ], 'watt', description="Energy apportioned to each tenant per second, and the energy no tenant is charged for; stacked, they add up to the GPUs' power.", stack=true),
      g.timeseries('GPUs used and held per tenant', [
        g.target(std.format('sum by (tenant) (rate(vgpu_tenant_gpu_used_seconds_total{%s}[$__rate_interval]))', ft), '{{tenant}} used'),
        g.target(std.format('sum by (tenant) (rate(vgpu_tenant_gpu_reserved_seconds_total{%s}[$__rate_interval]))', ft), '{{tenant}} held'),
      ], description="In GPU-equivalents: used is the tenant's share of the GPUs' activity, held what it reserves (its MIG instances' SMs, MPS active-thread caps or vGPU profiles, an equal part of what those leave of a shared GPU).") { w: 12 },
      g.timeseries('Device memory held per tenant', [
        g.target(std.format('sum by (tenant) (rate(vgpu_tenant_memory_byte_seconds_total{%s}[$__rate_interval]))', ft), '{{tenant}}'),
        // Per GPU, then summed: a GPU whose used memory is not served (MIG
        // read without privilege) is left out, not its tenants' memory
        // taken from the other GPUs'.
        g.target(std.format('sum(rate(vgpu_gpu_memory_used_byte_seconds_total{%(f)s}[$__rate_interval]) - on (%(k)s) group_left () (sum by (%(k)s) (rate(vgpu_tenant_memory_byte_seconds_total{%(f)s}[$__rate_interval])) or 0 * sum by (%(k)s) (rate(vgpu_gpu_memory_used_byte_seconds_total{%(f)s}[$__rate_interval]))))', { f: fh, k: std.format('%s, job, %s, gpu, uuid', [cl, host]) }), 'no tenant (driver reserve, unlisted processes)'),
      ], 'bytes', description="Memory each tenant held on average, and the GPUs' used memory that no tenant's process holds, counted on the GPUs whose used memory is served (not a MIG GPU read without privilege); stacked, they add up to the GPUs' used memory where every GPU's is served.", stack=true) { w: 12 },
      g.row('Chargeback'),
    ] + std.flattenArrays([
      [
        g.table('Per tenant, last %s' % p.name, [
          g.target(std.format('sum by (tenant) (increase(vgpu_tenant_energy_joules_total{%s}[%s])) / 3.6e6 or %s', [ft, p.range, idleRow(std.format('sum(increase(vgpu_tenant_idle_energy_joules_total{%s}[%s])) / 3.6e6', [fh, p.range]))])),
          g.target(std.format('sum by (tenant) (increase(vgpu_tenant_gpu_used_seconds_total{%s}[%s])) / 3600', [ft, p.range])),
          g.target(std.format('sum by (tenant) (increase(vgpu_tenant_gpu_reserved_seconds_total{%s}[%s])) / 3600', [ft, p.range])),
          g.target(std.format('sum by (tenant) (increase(vgpu_tenant_memory_byte_seconds_total{%s}[%s])) / (3600 * 2^30)', [ft, p.range])),
        ], description="Energy in kWh, GPU-hours used and held, memory in GiB-hours, over the last %s; the row idle (no tenant) is the energy no tenant is charged for (vgpu_tenant_idle_energy_joules_total), so that the energy column adds up to the GPUs' own.%s Export: panel menu, Inspect, Data, Download CSV." % [p.name, p.retention]) {
          w: 14,
          transformations+: [{ id: 'organize', options: { renameByName: {
            'Value #A': 'Energy (kWh)',
            'Value #B': 'GPU-hours used',
            'Value #C': 'GPU-hours held',
            'Value #D': 'Memory (GiB-hours)',
          } } }],
        },
        g.table('Cost per tenant, last %s' % p.name, [
          g.target(costWithIdle('component="gpu_time"', p.range)),
          g.target(costWithIdle('component="energy"', p.range)),
          g.target(costWithIdle('', p.range)),
        ], description="The exporters' vgpu_tenant_cost_total over the last %s, in each currency's base unit: GPU time held at the price per GPU-hour, apportioned energy at the price per kWh, and their sum; the row idle (no tenant) is vgpu_tenant_idle_cost_total, the GPU time no tenant held and the idle energy, so that the rows add up to the GPUs' time and energy at the prices. Empty where no exporter is given prices (--metering.* flags or the tenants file's metering section).%s Export: panel menu, Inspect, Data, Download CSV." % [p.name, p.retention]) {
          w: 10,
          transformations+: [{ id: 'organize', options: { renameByName: {
            currency: 'Currency',
            'Value #A': 'GPU time',
            'Value #B': 'Energy',
            'Value #C': 'Cost',
          } } }],
        },
      ]
      // A range longer than the data Prometheus keeps covers what it
      // keeps, with no sign of it: 15 days by default.
      for p in [
        { name: '24 hours', range: '1d', retention: '' },
        { name: '30 days', range: '30d', retention: ' It needs 30 days of data: Prometheus keeps 15 by default (--storage.tsdb.retention.time), and over less it sums what it keeps, with no sign of it; keep 31d, or query a long-term store.' },
      ]
    ])),
    'vgpu-tuner.json': g.dashboard(c, 'vgpu-tuner.json', 'vGPU / Tuner', 'The autotune controller: its mode per host, the settings it decided against those in effect, its actions, reverts and the recommendations it did not apply.', [clusterVar, jobVar, hostVar, gpuVar, tenantVar(true)], [
      g.row('Mode'),
      g.stat('Hosts in enforce', [g.target(std.format('count(max by (%(key)s) (vgpu_tuner_mode{%(f)s, mode="enforce"} == 1) or max by (%(key)s) (vgpu_tuner_gpu_mode{%(f)s, mode="enforce"} == 1)) or vector(0)', { key: hostKey, f: fh }))], description='Hosts whose tuner enforces, host-wide or on any of their GPUs (--tuner.gpu-mode).') { w: 6, h: 4 },
      g.stat('Kill switch engaged', [g.target(std.format('sum(vgpu_tuner_kill_switch_engaged{%s}) or vector(0)', fh))], thresholds=fromOne('orange')) { w: 6, h: 4 },
      g.stat('Originals not restored', [g.target(std.format('sum(vgpu_tuner_originals_unrestored{%s})', fh))], description='Settings the tuner changed whose journaled originals are still open; restored at exit.') { w: 6, h: 4 },
      g.stat('Restore failures', [g.target(std.format('sum(vgpu_tuner_restore_failures_total{%s})', fh))], thresholds=fromOne('red')) { w: 6, h: 4 },
      g.timeseries('Mode per host', [g.target(std.format('max by (%s, mode) (vgpu_tuner_mode{%s}) == 1', [host, fh]), '{{%s}} {{mode}}' % host)], description='One line per host at 1, labelled with its mode.') { w: 8 },
      g.timeseries('Mode per GPU', [g.target(std.format('vgpu_tuner_gpu_mode{%s} == 1', fg), gpuLegend + ' {{mode}}')], description="The mode the tuner applies to each GPU: the host-wide one or the GPU's own (--tuner.gpu-mode); one line per GPU at 1, labelled with its mode.") { w: 8 },
      g.timeseries('Kill switch per host', [g.target(std.format('vgpu_tuner_kill_switch_engaged{%s}', fh), '{{%s}}' % host)]) { w: 8 },
      g.timeseries('Time since the last run', [g.target(std.format('time() - vgpu_tuner_last_run_timestamp_seconds{%s}', fh), '{{%s}}' % host)], 's', description='Since the start of the latest round that ended (or the restore at start): it climbs to about one --tuner.interval (vgpu_tuner_interval_seconds) between rounds. VGPUTunerRoundsStalled fires once it stays over the interval plus %s s for %s.' % [c.tunerRoundStaleSeconds, c.alertFor.tunerRoundsStalled]) { w: 8 },
      g.timeseries('Oldest hook running', [g.target(std.format('vgpu_tuner_hook_oldest_running_seconds{%s}', fh), '{{%s}}' % host)], 's', description="How long the oldest MPS client restart or rebalancing plan that the tuner started off its round had run at its latest round (vgpu_tuner_hooks_running counts them); 0 when none runs. The rounds go on deciding meanwhile; it stays below the hook's timeout.") { w: 8 },
      g.row('Target and effective settings'),
      g.timeseries('MPS active threads per tenant', mpsTargetEffective(fg + ', tenant=~"$tenant"', '{{tenant}} ' + gpuLegend), 'percentunit', description="Target: what the tuner set (on a GPU in recommend mode, what it recommends and did not set); a change a guard refused, or that failed, leaves it as it was. Effective: what the clients' contexts were created with; while it differs from the target, the clients wait for a restart."),
      g.timeseries('Pause duty per tenant', [
        g.target(std.format('vgpu_tuner_pause_duty_target_ratio{%s, tenant=~"$tenant"}', fg), '{{tenant}} ' + gpuLegend + ' target'),
        g.target(std.format('vgpu_tuner_pause_duty_effective_ratio{%s, tenant=~"$tenant"}', fg), '{{tenant}} ' + gpuLegend + ' in force'),
      ], 'percentunit', description="Fraction of every period the tuner pauses a batch or best-effort tenant for (pause_duty; on a GPU in recommend mode, what it recommends and did not set). In force: as the pause actuator runs it, the largest duty of the tenant's GPUs, capped by --pause.max; 0 where the latest period's freeze failed."),
      eventPanel('Pause periods not paused', [eventTarget(std.format('vgpu_tuner_pause_freeze_failures_total{%s, tenant=~"$tenant"}', fh), host + ', tenant', '{{tenant}} {{%s}}' % host)], "Pause periods whose freeze failed, by tenant: each thawed once its freeze did not settle; the exporter's log says why."),
      g.timeseries('Power limit', [
        g.target(std.format('vgpu_tuner_power_limit_target_watts{%s}', fg), gpuLegend + ' target'),
        g.target(std.format('vgpu_gpu_power_limit_watts{%s}', fg), gpuLegend + ' effective'),
      ], 'watt'),
      g.timeseries('SM clock lock', [
        g.target(std.format('vgpu_tuner_locked_clock_target_hertz{%s}', fg), gpuLegend + ' target (0 unlocked)'),
        g.target(std.format('vgpu_gpu_sm_clock_hertz{%s}', fg), gpuLegend + ' SM clock'),
      ], 'hertz'),
      g.table('Time slice and vGPU scheduler', [
        g.target(std.format('vgpu_tuner_timeslice_target_info{%s}', fg)),
        g.target(std.format('vgpu_gpu_compute_timeslice_info{%s}', fg)),
        g.target(std.format('vgpu_tuner_vgpu_scheduler_target_info{%s}', fg)),
      ], description='Levels the tuner decided (level, policy) against the time slice in effect (timeslice).'),
      g.row('Actions'),
      eventPanel('Changes made', [tunerActions(fh, 'applied|failed|rolled_back')], 'Actions the tuner carried out, by knob and outcome: one bar per interval in which any happened.') { w: 8 },
      eventPanel('Reverts', [eventTarget(std.format('vgpu_tuner_reverts_total{%s}', fh), host, '{{%s}}' % host)], 'Changes undone because the SLO error rose after them, or rolled back after a failure.') { w: 8 },
      eventPanel('Recommendations not applied', [tunerActions(fh, 'recommended|guarded|refused')], 'Recommended (recommend mode), guarded (a guard refused) or refused (not supported, busy): one bar per interval in which any happened.') { w: 8 },
      eventPanel('Guard refusals', [eventTarget(std.format('vgpu_tuner_guard_refusals_total{%s}', fh), 'guard', '{{guard}}')], 'Actions a guard refused, by guard: one bar per interval in which any was.'),
      g.timeseries('Restores and journal errors', [
        g.target(eventCount(std.format('vgpu_tuner_restores_total{%s}', fh), host), '{{%s}} restored' % host),
        g.target(eventCount(std.format('vgpu_tuner_restore_failures_total{%s}', fh), host), '{{%s}} restore failed' % host),
        g.target(eventCount(std.format('vgpu_tuner_journal_errors_total{%s}', fh), host), '{{%s}} journal errors' % host),
      ], description='Originals restored, restores failed and journal writes failed, per interval, at 0 while none happens.' + countNote),
    ]),
  },
}
