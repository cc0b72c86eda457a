// Alerts. Each has a severity, a static summary, a templated description
// and a runbook_url into docs/runbooks.md.
{
  local c = self._config,
  local sel = c.vgpuExporterSelector,
  // The labels that identify one exporter, and one GPU of it.
  local hostKey = std.format('%s, job, %s', [c.clusterLabel, c.hostLabel]),
  local gpuKey = hostKey + ', uuid',
  local onHost = ' on {{ $labels.' + c.hostLabel + ' }}',
  local gpuOnHost = 'GPU {{ $labels.gpu }} ({{ $labels.uuid }})' + onHost,
  local onGPU = ' ' + gpuOnHost,

  local alert(name, severity, expr, forDuration, summary, description, extraLabels={}) = {
    alert: name,
    expr: expr,
    labels: { severity: severity } + extraLabels,
    annotations: {
      summary: summary,
      description: description,
      runbook_url: std.format(c.runbookURLPattern, std.asciiLower(name)),
    },
  } + (if forDuration != '' then { 'for': forDuration } else {}),

  // An event counter, served from 0 for every code (docs/metrics.md), so
  // increase() sees the first event.
  local newEvents(metric, window) = std.format('increase(%s[%s]) > 0', [metric, window]),

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'vgpu-slo',
        rules: [
          alert(
            a.alert,
            a.severity,
            std.format(|||
              cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate%(long)s > %(factor)s
              and on (%(by)s)
              cluster_tenant:vgpu_tenant_slo_burn_rate:ratio_rate%(short)s > %(factor)s
            |||, a { by: c.clusterLabel + ', tenant' }),
            a['for'],
            if a.severity == 'critical' then 'A tenant is spending its latency error budget fast.' else 'A tenant is spending its latency error budget faster than it accrues.',
            std.format('Tenant {{ $labels.tenant }} burns its latency error budget at {{ $value | humanize }}x the sustainable rate over the last %(long)s (and %(short)s, over %(factor)sx); at this rate the budget of its SLO period is gone early.', a),
            { long: a.long, short: a.short },
          )
          for a in c.sloBurnRateAlerts
        ],
      },
      {
        name: 'vgpu-tenant',
        rules: [
          alert(
            'VGPUTenantStarved',
            'warning',
            // No series tells a tenant whose work waits from one with
            // nothing to run. A time-sliced GPU tells part of it: it
            // switches contexts only while more than one wants to run, so
            // one that switched none in the window has no tenant waiting
            // (an idle neighbour of a busy tenant). On MIG only the
            // tenants of its own instance can take a tenant's SMs, so the
            // instance must be busy (its own SM activity, averaged over
            // the window like the GPU's: its tenants' averages would count
            // a neighbour there for a minute of it as busy all of it), not
            // the GPU. Elsewhere (MPS, vGPU, GPUs without the counter) an idle
            // process fires it too. The ratios are averaged over the
            // window: one reading (the exporter samples every second)
            // does not restart the for.
            std.format(|||
              (
                (
                  avg_over_time(vgpu_tenant_sm_active_ratio{%(sel)s, class=~"batch|best-effort"}[%(window)s]) < %(share)s
                  and on (%(key)s, tenant, gpu_instance)
                  max_over_time(vgpu_tenant_processes{%(sel)s}[%(window)s]) > 0
                )
                and on (%(key)s, gpu_instance)
                (
                  avg_over_time(vgpu_gpu_sm_active_ratio{%(sel)s}[%(window)s]) > %(busy)s
                  or
                  avg_over_time(vgpu_mig_sm_active_ratio{%(sel)s}[%(window)s]) > %(busy)s
                )
              )
              unless on (%(key)s)
              (
                rate(vgpu_gpu_context_switches_total{%(sel)s}[%(window)s]) == 0
                and on (%(key)s)
                vgpu_gpu_info{%(sel)s, mode="time-slice"}
              )
            |||, { sel: sel, key: gpuKey, share: c.starvedShareThreshold, busy: c.starvedBusyThreshold, window: c.starvedWindow }),
            c.starvedFor,
            'A tenant with processes on a busy GPU gets almost none of it.',
            'Tenant {{ $labels.tenant }} ({{ $labels.class }}) has processes on' + onGPU + '{{ if $labels.gpu_instance }} (MIG instance {{ $labels.gpu_instance }}){{ end }} but an SM share of {{ $value | humanizePercentage }} while the {{ if $labels.gpu_instance }}instance{{ else }}GPU{{ end }} is busy with other tenants.',
          ),
          alert(
            'VGPUTenantShareOvercommitted',
            'warning',
            std.format('vgpu_tenant_share_min_sum_ratio{%s} > 1', sel),
            c.alertFor.overcommitted,
            'The share guarantees of the tenants on a GPU add up to more than the GPU.',
            'The share.min guarantees of the tenants using' + onGPU + '{{ if $labels.gpu_instance }} (MIG instance {{ $labels.gpu_instance }}){{ end }} add up to {{ $value | humanizePercentage }}: they cannot all be met.',
          ),
          alert(
            'VGPUTenantAttributionConflict',
            'warning',
            std.format('vgpu_attribution_conflicting_subjects{%s} > 0', sel),
            c.alertFor.attributionConflict,
            'Processes match more than one tenant and are reported as unassigned.',
            '{{ $value }} processes or instances' + onHost + ' match the selectors of two or more tenants; their usage is reported under tenant="unassigned".',
          ),
        ],
      },
      {
        name: 'vgpu-gpu',
        rules: [
          alert(
            'VGPUDeviceDown',
            'critical',
            std.format('vgpu_gpu_up{%s} == 0', sel),
            c.alertFor.gpuDown,
            'A GPU cannot be read: lost, fallen off the bus or timing out.',
            gpuOnHost + ' has not been readable for %s.' % c.alertFor.gpuDown,
          ),
          alert(
            'VGPUXidHardwareError',
            'critical',
            newEvents(std.format('vgpu_gpu_events_total{%s, kind="xid", code=~"%s"}', [sel, c.xidHardwareCodes]), c.xidWindow),
            '',
            'A GPU reported an XID error that points at the hardware.',
            gpuOnHost + ' reported XID {{ $labels.code }} in the last %s.' % c.xidWindow,
          ),
          alert(
            'VGPUXidApplicationError',
            'warning',
            newEvents(std.format('vgpu_gpu_events_total{%s, kind="xid", code=~"%s"}', [sel, c.xidApplicationCodes]), c.xidWindow),
            '',
            'A GPU reported an XID error caused by a workload.',
            gpuOnHost + ' reported XID {{ $labels.code }} (a fault of the application) in the last %s.' % c.xidWindow,
          ),
          alert(
            'VGPUXidOtherError',
            'warning',
            newEvents(std.format('vgpu_gpu_events_total{%s, kind="xid", code!~"%s|%s"}', [sel, c.xidHardwareCodes, c.xidApplicationCodes]), c.xidWindow),
            '',
            'A GPU reported an XID error of no known class.',
            // code="other" counts every XID outside the exporter's list of
            // well-known ones: no series carries its number, the logs do.
            gpuOnHost + ' reported {{ if eq $labels.code "other" }}an XID outside the exporter\'s list of well-known XIDs (its number is in the exporter\'s log, msg="XID event", and in the host\'s kernel log){{ else }}XID {{ $labels.code }}{{ end }} in the last %s.' % c.xidWindow,
          ),
          alert(
            'VGPUEccUncorrectedErrors',
            'critical',
            std.format('increase(vgpu_gpu_ecc_errors_total{%s, type="uncorrected"}[%s]) > 0', [sel, c.xidWindow]),
            '',
            'A GPU had uncorrectable (double-bit) ECC errors.',
            gpuOnHost + ' had {{ $value | humanize }} uncorrected ECC errors in the last %s.' % c.xidWindow,
          ),
          alert(
            'VGPURowRemapPending',
            'warning',
            std.format('vgpu_gpu_row_remap_pending{%s} == 1', sel),
            c.alertFor.rowRemapPending,
            'A GPU has a memory row remapping that waits for a reset.',
            gpuOnHost + ' remapped a memory row that takes effect only after a GPU reset; it has waited %s.' % c.alertFor.rowRemapPending,
          ),
          alert(
            'VGPURetiredPagesPending',
            'warning',
            std.format('vgpu_gpu_retired_pages_pending{%s} == 1', sel),
            c.alertFor.retiredPagesPending,
            'A GPU has a retired memory page that waits for a reset or reboot.',
            gpuOnHost + ' retired a device memory page (ECC errors) that is taken out of use only after a GPU reset or reboot; it has waited %s.' % c.alertFor.retiredPagesPending,
          ),
          alert(
            'VGPURowRemapFailure',
            'critical',
            std.format('vgpu_gpu_row_remap_failure{%s} == 1', sel),
            '',
            'A GPU failed to remap a memory row.',
            gpuOnHost + ' failed to remap a device memory row: it has no spare rows left for the failing memory and needs service.',
          ),
          alert(
            'VGPUNVLinkErrorsRising',
            'warning',
            std.format('sum without (type) (increase(vgpu_gpu_nvlink_errors_total{%s}[%s])) > %s', [sel, c.healthWindow, c.nvlinkErrorsThreshold]),
            '',
            'A GPU counts NVLink errors.',
            'The NVLink links of' + onGPU + ' counted {{ $value | humanize }} errors (CRC, replay, recovery) in the last %s.' % c.healthWindow,
          ),
          alert(
            'VGPUPCIeReplaysRising',
            'warning',
            std.format('increase(vgpu_gpu_pcie_replays_total{%s}[%s]) > %s', [sel, c.healthWindow, c.pcieReplaysThreshold]),
            '',
            'A GPU counts PCIe replays.',
            'The PCIe link of' + onGPU + ' replayed {{ $value | humanize }} times in the last %s.' % c.healthWindow,
          ),
          alert(
            'VGPUThermalThrottling',
            'warning',
            std.format('max without (reason) (avg_over_time(vgpu_gpu_clock_event_reason_active{%s, reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}[%s])) > %s', [sel, c.throttleWindow, c.throttleFraction]),
            '',
            'A GPU is slowed down by temperature.',
            'Thermal slowdown held the clocks of' + onGPU + ' down {{ $value | humanizePercentage }} of the last %s.' % c.throttleWindow,
          ),
          alert(
            'VGPUPowerThrottling',
            'warning',
            // NVML sets hw_slowdown for an over-temperature too: while a
            // thermal slowdown holds the GPU (VGPUThermalThrottling), its
            // hw_slowdown is that, not the power; the power brake is always.
            local r(reasons) = std.format('max without (reason) (avg_over_time(vgpu_gpu_clock_event_reason_active{%s, reason=~"%s"}[%s])) > %s', [sel, reasons, c.throttleWindow, c.throttleFraction]);
            std.format(|||
              %(brake)s
              or
              (
                %(slowdown)s
                unless on (%(key)s)
                %(thermal)s
              )
            |||, { brake: r('hw_power_brake_slowdown'), slowdown: r('hw_slowdown'), thermal: r('sw_thermal_slowdown|hw_thermal_slowdown'), key: gpuKey }),
            '',
            'A GPU is slowed down by a hardware power limit.',
            'Hardware slowdown or the power brake held the clocks of' + onGPU + ' down {{ $value | humanizePercentage }} of the last %s.' % c.throttleWindow,
          ),
        ],
      },
      {
        name: 'vgpu-exporter',
        rules: [
          alert(
            'VGPUExporterDown',
            'warning',
            std.format('up{%s} == 0', sel),
            c.alertFor.exporterDown,
            'Prometheus cannot scrape vgpu_exporter.',
            'The vgpu_exporter target {{ $labels.' + c.hostLabel + ' }} of job {{ $labels.job }} has been down for %s: its GPUs are not monitored.' % c.alertFor.exporterDown,
          ),
          alert(
            'VGPUExporterCollectorFailing',
            'warning',
            std.format('vgpu_scrape_collector_success{%s} == 0', sel),
            c.alertFor.collectorFailing,
            'A collector of vgpu_exporter fails.',
            'Collector {{ $labels.collector }} of vgpu_exporter' + onHost + ' has failed for %s; its series are missing or old.' % c.alertFor.collectorFailing,
          ),
          alert(
            'VGPUExporterSamplingSlow',
            'warning',
            // Against each exporter's own interval; one that does not
            // serve it (an older version) is taken at sampleIntervalSeconds.
            std.format('rate(vgpu_samples_total{%(sel)s}[5m]) * on (%(key)s) group_left () (vgpu_sample_interval_seconds{%(sel)s} or on (%(key)s) 0 * vgpu_samples_total{%(sel)s} + %(s)s) < 0.9', { sel: sel, key: hostKey, s: c.sampleIntervalSeconds }),
            c.alertFor.samplingSlow,
            'vgpu_exporter samples the GPUs less often than its interval.',
            'vgpu_exporter' + onHost + ' took {{ $value | humanizePercentage }} of the samples its --sample.interval asks for over the last 5 minutes.',
          ),
          alert(
            'VGPUExporterSampleStale',
            'warning',
            std.format('time() - vgpu_last_sample_timestamp_seconds{%s} > %s', [sel, c.sampleStaleSeconds]),
            c.alertFor.sampleStale,
            'vgpu_exporter serves an old sample.',
            'The last successful sample of vgpu_exporter' + onHost + ' is {{ $value | humanizeDuration }} old: every GPU series it serves is stale.',
          ),
          alert(
            'VGPUExporterDuplicateGPU',
            'warning',
            // served from 0, so increase() sees the first device dropped;
            // the window is longer than the for:, so that one sample's
            // duplicate fires too
            std.format('increase(vgpu_sample_duplicate_gpus_dropped_total{%s}[%s]) > 0', [sel, c.duplicateGPUWindow]),
            c.alertFor.duplicateGPU,
            'The backend of vgpu_exporter lists a GPU twice in its samples.',
            'The backend of vgpu_exporter' + onHost + ' listed a GPU twice in a sample; the later copies are dropped (in the last %s: {{ $value | humanize }}), so that every series sees one device per GPU, the first listed. The exporter\'s log names the GPUs (msg="the backend listed a GPU twice...").' % c.duplicateGPUWindow,
          ),
          alert(
            'VGPUExporterLatencySourceDown',
            'warning',
            // absent before the source's first read (not down: not read
            // yet), so a source not read yet does not fire
            std.format('vgpu_tenant_latency_source_up{%s} == 0', sel),
            c.alertFor.latencySourceDown,
            "vgpu_exporter cannot read a tenant's latency source.",
            'The latency source of tenant {{ $labels.tenant }} has not been readable' + onHost + ' for %s; its latency and SLO series are missing or old.' % c.alertFor.latencySourceDown,
          ),
          alert(
            'VGPUExporterKubeletUnreachable',
            'warning',
            std.format('vgpu_kubelet_pod_resources_up{%s} == 0', sel),
            c.alertFor.kubeletUnreachable,
            'vgpu_exporter cannot query the kubelet pod-resources API.',
            'vgpu_exporter' + onHost + ' has failed to query the kubelet pod-resources API for %s; tenant attribution uses an old pod mapping.' % c.alertFor.kubeletUnreachable,
          ),
          alert(
            'VGPUExporterPodMetadataFailing',
            'warning',
            // absent before the first read (read only after a good
            // pod-resources query), so a read never tried does not fire
            std.format('vgpu_kubelet_pod_metadata_up{%s} == 0', sel),
            c.alertFor.podMetadataFailing,
            'vgpu_exporter cannot read its pod metadata.',
            'vgpu_exporter' + onHost + ' has failed to read its pod metadata for %s; pods new since its last good read have no labels, so labels selectors miss them and processes of pods sharing a GPU stay unassigned.' % c.alertFor.podMetadataFailing,
          ),
          alert(
            'VGPUExporterDcgmUnreachable',
            'warning',
            // on the errors, not on up: a source that fails every other
            // scrape toggles up and would restart a for: on up == 0
            std.format('increase(vgpu_dcgm_exporter_scrape_errors_total{%s}[%s]) > 0', [sel, c.dcgmErrorWindow]),
            c.alertFor.dcgmExporterUnreachable,
            'vgpu_exporter cannot scrape dcgm-exporter.',
            'vgpu_exporter' + onHost + ' has failed to scrape dcgm-exporter, all the time or on and off, for %s ({{ $value | humanize }} failed scrapes in the last %s); its readings lack the DCGM fields while it fails (pre-Hopper GPUs lose their profiling ratios).' % [c.alertFor.dcgmExporterUnreachable, c.dcgmErrorWindow],
          ),
          alert(
            'VGPUExporterDcgmNoFigures',
            'warning',
            // GPUs up that the page had no current series for: another
            // host's dcgm-exporter, or a page without the fields read
            std.format('count without (gpu, uuid) (vgpu_gpu_up{%(sel)s} == 1) > vgpu_dcgm_exporter_gpus_matched{%(sel)s} and vgpu_dcgm_exporter_up{%(sel)s} == 1', { sel: sel }),
            c.alertFor.dcgmExporterNoFigures,
            'dcgm-exporter answers without figures for some GPUs of this host.',
            'vgpu_exporter' + onHost + ' has scraped dcgm-exporter for %s but the page lacks current DCGM fields for some of its {{ $value }} GPUs up (vgpu_dcgm_exporter_gpus_matched counts those it has); their readings lack the DCGM fields.' % c.alertFor.dcgmExporterNoFigures,
          ),
          alert(
            'VGPUExporterConfigReloadFailed',
            'warning',
            std.format('vgpu_config_last_reload_successful{%(sel)s} == 0 or vgpu_web_config_last_reload_successful{%(sel)s} == 0', { sel: sel }),
            c.alertFor.configReloadFailed,
            'vgpu_exporter failed to reload its configuration.',
            'The last reload of the tenants file or the web configuration of vgpu_exporter' + onHost + ' failed; the previous configuration stays in use.',
          ),
          alert(
            'VGPUExporterCertificateExpiresSoon',
            'warning',
            std.format('vgpu_web_config_certificate_expiry_timestamp_seconds{%s} - time() < %d * 86400', [sel, c.certificateExpiryDays]),
            c.alertFor.certificateExpiresSoon,
            "A certificate of vgpu_exporter's web configuration expires soon.",
            'The {{ $labels.certificate }} certificate of the web configuration in use by vgpu_exporter' + onHost + ' expires in {{ $value | humanizeDuration }}; a renewal refused leaves it in use.',
          ),
        ],
      },
      {
        name: 'vgpu-tuner',
        rules: [
          alert(
            'VGPUTunerActionsFailing',
            'warning',
            std.format('sum without (outcome) (increase(vgpu_tuner_actions_total{%s, outcome="failed"}[%s])) >= %s', [sel, c.tunerWindow, c.tunerFailedActionsThreshold]),
            '',
            'The tuner fails to apply its changes.',
            '{{ $value | humanize }} changes of {{ $labels.knob }} by the tuner' + onHost + ' failed in the last %s.' % c.tunerWindow,
          ),
          alert(
            'VGPUTunerPauseNotInForce',
            'warning',
            // A failed period counts once: the rate times each exporter's
            // own --pause.period is the fraction of its periods that
            // failed, whatever the period; one that does not serve it (an
            // older version) is taken at pausePeriodSeconds.
            std.format('rate(vgpu_tuner_pause_freeze_failures_total{%(sel)s}[%(w)s]) * on (%(key)s) group_left () (vgpu_tuner_pause_period_seconds{%(sel)s} or on (%(key)s) 0 * vgpu_tuner_last_run_timestamp_seconds{%(sel)s} + %(p)g) >= %(f)g', { sel: sel, key: hostKey, w: c.tunerPauseWindow, p: c.pausePeriodSeconds, f: c.tunerPauseFailedFraction }),
            c.alertFor.tunerPauseNotInForce,
            'A tenant the tuner pauses keeps running: its freezes fail.',
            '{{ $value | humanizePercentage }} of the pause periods of tenant {{ $labels.tenant }} failed to freeze in the last %s' % c.tunerPauseWindow + onHost + ': each was thawed once its freeze did not settle, and the latency tenants beside it lack the time the tuner meant to give them.',
          ),
          alert(
            'VGPUTunerRevertingOften',
            'warning',
            std.format('increase(vgpu_tuner_reverts_total{%s}[%s]) >= %s', [sel, c.tunerWindow, c.tunerRevertsThreshold]),
            '',
            'The tuner keeps undoing its own changes.',
            'The tuner' + onHost + ' reverted or rolled back {{ $value | humanize }} changes in the last %s: its changes make the SLO error worse or fail.' % c.tunerWindow,
          ),
          alert(
            'VGPUTunerRestoreFailed',
            'critical',
            // A failed restore keeps its original open; the counter stays
            // up until the exporter restarts, also once a thaw that failed
            // succeeded at a later round and nothing the tuner made is left.
            std.format(|||
              vgpu_tuner_restore_failures_total{%(sel)s} > 0
              and on (%(key)s)
              vgpu_tuner_originals_unrestored{%(sel)s} > 0
            |||, { sel: sel, key: hostKey }),
            '',
            'The tuner could not restore original GPU settings from its journal.',
            'The tuner' + onHost + ' could not restore the original of some settings it changed ({{ $value | humanize }} since the exporter started): the GPUs keep settings the tuner made.',
          ),
          alert(
            'VGPUTunerPauseThawPending',
            'critical',
            // A pause an earlier run left whose thaw at start failed is
            // tried again at every round: the gauge falls back to 0 at
            // the round whose thaw takes, so the for: lets a fault that
            // passes by itself go unpaged.
            std.format('vgpu_tuner_pause_thaws_pending{%s} > 0', [sel]),
            c.alertFor.tunerPauseThawPending,
            'A tenant an earlier run of the tuner paused may be left frozen: its thaw keeps failing.',
            'The tuner' + onHost + " could not thaw {{ $value | humanize }} pauses an earlier run left open (tried again at every round for %s): their tenants' processes may be frozen, doing no work." % c.alertFor.tunerPauseThawPending,
          ),
          alert(
            'VGPUTunerJournalErrors',
            'warning',
            // held while the journal stays unwritable (the gauge is
            // probed each round after a failed write), not only while
            // failed writes, made only as the tuner decides, are counted
            std.format(|||
              vgpu_tuner_journal_writable{%(sel)s} == 0
              or
              increase(vgpu_tuner_journal_errors_total{%(sel)s}[%(for)s]) > 0
            |||, { sel: sel, 'for': c.alertFor.tunerJournalErrors }),
            '',
            'The tuner cannot write its journal.',
            'The journal of the tuner' + onHost + ' cannot be written (vgpu_tuner_journal_writable 0, probed each round), or a write to it failed in the last %s; changes whose originals cannot be journaled are not made.' % c.alertFor.tunerJournalErrors,
          ),
          alert(
            'VGPUTunerKillSwitchEngaged',
            'warning',
            std.format(|||
              vgpu_tuner_kill_switch_engaged{%(sel)s} == 1
              and on (%(key)s)
              (
                vgpu_tuner_mode{%(sel)s, mode="enforce"} == 1
                or
                max by (%(key)s) (vgpu_tuner_gpu_mode{%(sel)s, mode="enforce"}) == 1
              )
            |||, { sel: sel, key: hostKey }),
            c.alertFor.tunerKillSwitch,
            'A tuner in enforce mode (the host, or some of its GPUs) is stopped by the kill switch.',
            'The tuner' + onHost + ' is in enforce mode (the host, or some of its GPUs) but its kill switch has been engaged for %s: it makes no change but reverts of its own, and the settings stay as they are.' % c.alertFor.tunerKillSwitch,
          ),
          alert(
            'VGPUTunerRoundsStalled',
            'warning',
            // The tuner's series are served only while it runs, and it
            // runs its rounds in every mode and with the kill switch
            // engaged: a last round older than one interval is a round
            // that has not ended (the timestamp is the start of the latest
            // round that ended; the next starts an interval after it).
            // Against each exporter's own --tuner.interval plus the time a
            // round may take; one that does not serve its interval (an
            // older version) is held to tunerRoundStaleSeconds alone.
            std.format('time() - vgpu_tuner_last_run_timestamp_seconds{%(sel)s} > on (%(key)s) group_left () (vgpu_tuner_interval_seconds{%(sel)s} or on (%(key)s) 0 * vgpu_tuner_last_run_timestamp_seconds{%(sel)s}) + %(s)s', { sel: sel, key: hostKey, s: c.tunerRoundStaleSeconds }),
            c.alertFor.tunerRoundsStalled,
            "The tuner's rounds are stalled: it makes no decision.",
            'The latest round of the tuner' + onHost + ' that ended started {{ $value | humanizeDuration }} ago: a round is under way that waits for a call made in it (an NVML call, the MPS daemon, nvidia-smi, a freezer write, the restart hook of a restore; hooks the tuner starts run off the round), and until it ends the tuner decides nothing, raises or thaws no pause, reverts nothing and does not act on its kill switch.',
          ),
        ],
      },
    ],
  },
}
