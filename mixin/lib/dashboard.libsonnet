// A small builder for Grafana dashboards (schema 39): panels query the
// Prometheus data source chosen by the ${datasource} variable, never a
// fixed one.
local ds = { type: 'prometheus', uid: '${datasource}' };
{
  datasource: ds,

  // A PromQL target.
  target(expr, legend='', instant=false):: {
    datasource: ds,
    expr: expr,
    legendFormat: legend,
    refId: 'A',
  } + (if instant then { instant: true, range: false } else {}),

  local panel(type, title, targets, unit, description) = {
    type: type,
    title: title,
    description: description,
    datasource: ds,
    targets: [t { refId: std.char(std.codepoint('A') + i) } for i in std.range(0, std.length(targets) - 1) for t in [targets[i]]],
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
  },

  timeseries(title, targets, unit='short', description='', stack=false):: panel('timeseries', title, targets, unit, description) {
    fieldConfig+: { defaults+: { custom: { lineWidth: 1, fillOpacity: if stack then 30 else 10, stacking: { mode: if stack then 'normal' else 'none' } } } },
    options: { legend: { displayMode: 'table', placement: 'bottom', calcs: ['lastNotNull', 'max'] }, tooltip: { mode: 'multi', sort: 'desc' } },
  },

  // Events counted per interval, drawn as stacked bars: the targets keep only
  // the intervals with events (`> 0`), so a series shows only where something
  // happened and the legend lists only what did.
  events(title, targets, description=''):: self.timeseries(title, targets, 'short', description, stack=true) {
    fieldConfig+: { defaults+: { custom+: { drawStyle: 'bars', fillOpacity: 80, barAlignment: 0, showPoints: 'never', spanNulls: false } } },
    options+: { legend+: { calcs: ['sum'] } },
  },

  stat(title, targets, unit='short', description='', thresholds=null):: panel('stat', title, [t { instant: true, range: false } for t in targets], unit, description) {
    options: { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false }, colorMode: 'value', graphMode: 'none', textMode: 'auto' },
    fieldConfig+: { defaults+: (if thresholds == null then {} else { thresholds: { mode: 'absolute', steps: thresholds } }) },
  },

  table(title, targets, unit='short', description=''):: panel('table', title, [t { instant: true, range: false, format: 'table' } for t in targets], unit, description) {
    transformations: [{ id: 'merge', options: {} }],
  },

  row(title):: { type: 'row', title: title, collapsed: false, panels: [] },

  // Template variables.
  datasourceVariable:: {
    name: 'datasource',
    label: 'Data source',
    type: 'datasource',
    query: 'prometheus',
    current: {},
    hide: 0,
    refresh: 1,
  },
  queryVariable(name, label, query, multi=true):: {
    name: name,
    label: label,
    type: 'query',
    datasource: ds,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    definition: query,
    refresh: 2,
    sort: 1,
    multi: multi,
    includeAll: true,
    allValue: '.*',
    current: { selected: true, text: ['All'], value: ['$__all'] },
    hide: 0,
  },

  // Lays panels out left to right, 24 columns wide, each its given width
  // (default 12) and height (default 8); a row starts a new line.
  layout(panels):: std.foldl(
    function(acc, p)
      local w = if p.type == 'row' then 24 else std.get(p, 'w', 12);
      local h = if p.type == 'row' then 1 else std.get(p, 'h', 8);
      local wrap = p.type == 'row' || acc.x + w > 24;
      local x = if wrap then 0 else acc.x;
      local y = if wrap then acc.y + acc.rowH else acc.y;
      {
        x: if p.type == 'row' then 0 else x + w,
        y: if p.type == 'row' then y + 1 else y,
        rowH: if p.type == 'row' then 0 else if wrap then h else std.max(acc.rowH, h),
        panels: acc.panels + [{ [k]: p[k] for k in std.objectFields(p) if k != 'w' && k != 'h' } {
          id: std.length(acc.panels) + 1,
          gridPos: { x: x, y: y, w: w, h: h },
        }],
      },
    panels,
    { x: 0, y: 0, rowH: 0, panels: [] },
  ).panels,

  dashboard(config, file, title, description, variables, panels):: {
    uid: config.dashboardUIDs[file],
    title: title,
    description: description,
    tags: config.dashboardTags,
    timezone: config.dashboardTimezone,
    refresh: config.dashboardRefresh,
    schemaVersion: 39,
    version: 1,
    editable: true,
    graphTooltip: 1,
    time: { from: 'now-6h', to: 'now' },
    timepicker: {},
    annotations: { list: [] },
    links: [{ title: 'vgpu dashboards', type: 'dashboards', tags: config.dashboardTags, asDropdown: true, includeVars: true, keepTime: true }],
    templating: { list: [$.datasourceVariable] + variables },
    panels: $.layout(panels),
  },
}
