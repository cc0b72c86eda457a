// The vgpu_exporter monitoring mixin: alerts, recording rules and Grafana
// dashboards. See docs/mixin.md.
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'rules.libsonnet') +
(import 'dashboards.libsonnet')
