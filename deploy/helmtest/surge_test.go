package helmtest

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestNoSurgeWithTheTuner: a rolling update of a DaemonSet whose tuner is
// on replaces each node's pod after the old one has exited (maxSurge 0:
// the old pod sets back what it changed at SIGTERM, and the new one then
// takes the journal's lock), and the chart refuses a surge, which would
// start the new pod beside the old one: two tuners on one node's GPUs, the
// new one failing on the journal's lock, never ready, and the rollout
// never done; before, the chart rendered any maxSurge. Without the tuner a
// surge is the operator's choice. No surge with none unavailable, which
// the API server refuses partway through an install, is refused too,
// saying to make maxUnavailable 1 or more (and, where any pool runs the
// tuner, that a surge is refused: before, only where the first pool did),
// and so is a surge with some unavailable, which the API server refuses
// for a DaemonSet.
func TestNoSurgeWithTheTuner(t *testing.T) {
	surge := func(v any) map[string]any {
		return map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": v, "maxUnavailable": 0}}
	}
	noSurge := func(v any) map[string]any {
		return map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": v, "maxUnavailable": 1}}
	}
	checkCases(t, []valuesCase{
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}}, ""},
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "updateStrategy": surge(1)},
			"the release: updateStrategy.rollingUpdate.maxSurge=1 starts each node's new pod beside the old one"},
		{map[string]any{"tuner": map[string]any{"mode": "recommend"}, "updateStrategy": surge("25%")},
			"the release: updateStrategy.rollingUpdate.maxSurge=25%"},
		{map[string]any{"tuner": map[string]any{"gpuModes": []any{"0=enforce"}}, "updateStrategy": surge(1)},
			"updateStrategy.rollingUpdate.maxSurge=1"},
		// A number as a string, which the API server refuses (only a
		// percentage may be one), is refused by the schema.
		{map[string]any{"updateStrategy": surge("1")}, "'/updateStrategy/rollingUpdate/maxSurge': '1' does not match"},
		{map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": -1}}}, "'/updateStrategy/rollingUpdate/maxUnavailable': minimum"},
		{map[string]any{"updateStrategy": map[string]any{"type": "Recreate"}}, "'/updateStrategy/type': value must be one of"},
		{map[string]any{"updateStrategy": surge(1), "nodePools": []any{
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
			map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"}, "tuner": map[string]any{"mode": "enforce"}}}},
			"nodePools b: updateStrategy.rollingUpdate.maxSurge=1"},
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "updateStrategy": noSurge(0)}, ""},
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "updateStrategy": noSurge("0%")}, ""},
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "updateStrategy": map[string]any{"type": "OnDelete", "rollingUpdate": nil}}, ""},
		{map[string]any{"updateStrategy": surge(1)}, ""},
		// No surge and none unavailable: the API server refuses it.
		{map[string]any{"tuner": map[string]any{"mode": "enforce"}, "updateStrategy": surge(0)},
			"updateStrategy.rollingUpdate: maxUnavailable=0 with maxSurge=0 would replace no pod, and the API server refuses it: set maxUnavailable to 1 or more (with the tuner on, a surge is refused"},
		{map[string]any{"updateStrategy": surge(0), "nodePools": []any{
			map[string]any{"name": "a", "nodeSelector": map[string]any{"pool": "a"}},
			map[string]any{"name": "b", "nodeSelector": map[string]any{"pool": "b"}, "tuner": map[string]any{"mode": "recommend"}}}},
			"set maxUnavailable to 1 or more (with the tuner on, a surge is refused"},
		{map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": "0%"}}},
			"maxUnavailable=0% with maxSurge=0 would replace no pod"},
		{map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": "100%"}}, "tuner": map[string]any{"mode": "enforce"}}, ""},
		// A surge and some unavailable: the API server refuses it for a
		// DaemonSet, and the chart's default maxUnavailable is 1.
		{map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": 1}}},
			"updateStrategy.rollingUpdate: maxSurge=1 with maxUnavailable=1 (the chart's default is 1), and the API server refuses a DaemonSet with both: with a surge set maxUnavailable to 0"},
	}, func(tc valuesCase, m *manifests) {
		for _, ds := range m.daemonSets {
			s := ds.Spec.UpdateStrategy
			if s.Type == appsv1.OnDeleteDaemonSetStrategyType || len(argsWithPrefix(ds.Spec.Template.Spec.Containers[0].Args, "--tuner.mode=")) == 0 {
				continue
			}
			if s.RollingUpdate != nil && s.RollingUpdate.MaxSurge != nil && s.RollingUpdate.MaxSurge.String() != "0" && s.RollingUpdate.MaxSurge.String() != "0%" {
				t.Errorf("values %v: DaemonSet %s with the tuner on surges (maxSurge %s)", tc.vals, ds.Name, s.RollingUpdate.MaxSurge)
			}
		}
	})
}
