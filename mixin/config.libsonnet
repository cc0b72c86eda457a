// Settings of the vgpu_exporter mixin. Override any of them:
//   (import 'vgpu-mixin/mixin.libsonnet') + { _config+:: { vgpuExporterSelector: 'job="gpu"' } }
{
  // Settings that are gone fail the build rather than be ignored.
  assert !std.objectHasAll(self._config, 'sloObjectives') :
         '_config.sloObjectives is no longer read: each tenant\'s SLO objective comes from the exporter\'s vgpu_tenant_slo_objective_ratio, whatever it is; remove sloObjectives from your _config (docs/mixin.md, "Changing the configuration")',
  assert !std.objectHasAll(self._config, 'tunerPauseFailuresThreshold') :
         '_config.tunerPauseFailuresThreshold is no longer read: VGPUTunerPauseNotInForce fires on the fraction of pause periods failed, tunerPauseFailedFraction (a count of 30 in 5m was a twentieth of the periods only at the default 500 ms --pause.period); remove tunerPauseFailuresThreshold from your _config (docs/mixin.md, "Tuner alerts")',

  _config+:: {
    // Selects the exporter's series in every rule and dashboard.
    vgpuExporterSelector: 'job="vgpu"',

    // The label that tells clusters apart (set by external labels or
    // relabelling). Rules aggregate by it; with no such label the
    // aggregates simply carry none.
    clusterLabel: 'cluster',
    // The label that tells hosts apart.
    hostLabel: 'instance',

    // Alert thresholds.
    starvedShareThreshold: 0.01,  // a tenant below this SM share is starved ...
    starvedBusyThreshold: 0.5,  // ... while the GPU is at least this busy
    starvedFor: '30m',
    // ... both averaged over this window (a brief dip does not restart
    // starvedFor); a time-sliced GPU that switched no context in it has no
    // second tenant waiting.
    starvedWindow: '5m',
    throttleFraction: 0.5,  // throttled more than this fraction of throttleWindow
    throttleWindow: '15m',
    xidWindow: '10m',
    // Interconnect health: NVLink link errors and PCIe replays counted
    // over healthWindow; more than the threshold fires. Healthy links count
    // none; raise a threshold where a fleet has a known background rate.
    healthWindow: '15m',
    nvlinkErrorsThreshold: 0,
    pcieReplaysThreshold: 0,
    // XID codes by class (regular expressions over the code label).
    // hardware: double-bit ECC (48), row remap failure (64), NVLink (74),
    // fallen off the bus (79), contained/uncontained ECC (94, 95), GSP (119, 120),
    // unrecovered ECC (140), NVLink fatal (149), recovery action changed (154:
    // the driver asks for a GPU reset, a node reboot or a drain): the GPU
    // needs a reset or service.
    xidHardwareCodes: '48|64|74|79|94|95|119|120|140|149|154',
    // application: graphics engine exception (13), MMU fault (31), channel
    // stopped (43), preemptive cleanup (45), video processor exception (69),
    // context switch timeout (109): faults of the workload, not the GPU.
    // Codes outside docs/metrics.md's list of well-known XIDs count under
    // code="other", which the third class (any other code) catches.
    xidApplicationCodes: '13|31|43|45|69|109',
    // The tuner: failed actions and reverts counted over tunerWindow.
    tunerWindow: '1h',
    // VGPUExporterDcgmUnreachable: failed dcgm-exporter scrapes in every
    // window of this length for its for:, whether it is down or flapping
    // (a flapping source's up reads 1 half the time).
    dcgmErrorWindow: '5m',
    // VGPUExporterDuplicateGPU: devices the exporter dropped for repeating
    // a GPU of the same sample, counted over this window.
    duplicateGPUWindow: '10m',
    tunerFailedActionsThreshold: 3,  // failed actions of one knob in tunerWindow
    tunerRevertsThreshold: 3,  // reverts in tunerWindow
    // VGPUTunerPauseNotInForce: the fraction of one tenant's pause periods
    // whose freeze failed within tunerPauseWindow, sustained for its for:.
    // A failed period counts once, so the fraction is the failures' rate
    // times each exporter's --pause.period (vgpu_tuner_pause_period_seconds;
    // an older exporter that does not serve it is taken at
    // pausePeriodSeconds, the default): 0.05 is 30 of the 600 periods of
    // 5m at 500 ms, 1 of the 20 at 15 s.
    tunerPauseWindow: '5m',
    tunerPauseFailedFraction: 0.05,
    pausePeriodSeconds: 0.5,
    // VGPUExporterCertificateExpiresSoon: a certificate of the web
    // configuration in use expires within this many days.
    certificateExpiryDays: 7,
    // The dashboards' event panels (XID, NVLink and PCIe errors, the
    // tuner's actions) read each counter's rise every eventDeltaStep: the
    // scrape interval of the exporter or less (the chart's ServiceMonitor
    // scrapes every 15s). A longer step loses the events before an
    // exporter's restart within one step; a shorter one reads more points
    // (each rise still counts once).
    eventDeltaStep: '15s',
    // --sample.interval, in seconds, of the exporters that do not serve
    // their own (vgpu_sample_interval_seconds): older versions.
    sampleIntervalSeconds: 1,
    // The served snapshot is stale when older than this, in seconds.
    sampleStaleSeconds: 60,
    // VGPUTunerRoundsStalled: the tuner's latest round that ended started
    // more than its --tuner.interval (vgpu_tuner_interval_seconds) plus
    // this long ago, in seconds, for alertFor.tunerRoundsStalled: the time
    // a round may take. A round does not wait for the hooks it starts
    // (they run off the round); it waits for the calls it makes (NVML, the
    // MPS daemon, nvidia-smi, each with its timeout, and a restore's
    // restart hook). With the for: it fires once no round has ended for
    // about the interval plus 7 minutes, whatever the interval. An
    // exporter that does not serve its interval (an older version) is
    // held to this alone: it fires there at about 7 minutes, and between
    // the rounds of a --tuner.interval over about 6 minutes.
    tunerRoundStaleSeconds: 120,

    // Latency SLO: the objective of a tenant, whatever it is, comes from
    // vgpu_tenant_slo_objective_ratio (the q label of
    // vgpu_tenant_slo_target_seconds as a value).
    // Multiwindow, multi-burn-rate alerts (SRE workbook, chapter 5). The
    // window names are part of the recording rules' names; sloWindowRanges
    // gives the range each one covers (scaled down in tests).
    sloBurnRateAlerts: [
      { alert: 'VGPUTenantErrorBudgetFastBurn', severity: 'critical', factor: 14.4, long: '1h', short: '5m', 'for': '2m' },
      { alert: 'VGPUTenantErrorBudgetFastBurn', severity: 'critical', factor: 6, long: '6h', short: '30m', 'for': '15m' },
      { alert: 'VGPUTenantErrorBudgetSlowBurn', severity: 'warning', factor: 3, long: '1d', short: '2h', 'for': '1h' },
      { alert: 'VGPUTenantErrorBudgetSlowBurn', severity: 'warning', factor: 1, long: '3d', short: '6h', 'for': '3h' },
    ],
    sloWindowRanges: { '5m': '5m', '30m': '30m', '1h': '1h', '2h': '2h', '6h': '6h', '1d': '1d', '3d': '3d' },
    // How long the other alerts must hold before they fire.
    alertFor: {
      gpuDown: '5m',
      overcommitted: '10m',
      exporterDown: '5m',
      collectorFailing: '10m',
      samplingSlow: '15m',
      sampleStale: '5m',
      latencySourceDown: '10m',
      kubeletUnreachable: '10m',
      podMetadataFailing: '10m',
      configReloadFailed: '5m',
      certificateExpiresSoon: '1h',
      attributionConflict: '15m',
      dcgmExporterUnreachable: '10m',
      dcgmExporterNoFigures: '10m',
      duplicateGPU: '5m',
      tunerKillSwitch: '1h',
      tunerJournalErrors: '5m',
      tunerPauseNotInForce: '10m',
      tunerPauseThawPending: '5m',
      tunerRoundsStalled: '5m',
      // A row remap pending a reset for longer than this (a reset after a
      // drain usually follows within minutes).
      rowRemapPending: '15m',
      // The same for a page retirement (GPUs before Ampere retire pages
      // instead of remapping rows).
      retiredPagesPending: '15m',
    },

    // Runbook links: %s is the alert name in lower case.
    runbookURLPattern: 'https://github.com/vgpu-exporter/vgpu_exporter/blob/main/docs/runbooks.md#%s',

    // Dashboards.
    dashboardUIDs: {
      'vgpu-overview.json': 'vgpu-overview',
      'vgpu-tenant.json': 'vgpu-tenant',
      'vgpu-gpu.json': 'vgpu-gpu',
      'vgpu-tuner.json': 'vgpu-tuner',
      'vgpu-chargeback.json': 'vgpu-chargeback',
    },
    dashboardTags: ['vgpu'],
    dashboardRefresh: '30s',
    dashboardTimezone: 'utc',
  },
}
