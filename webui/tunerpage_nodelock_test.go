package webui

import (
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// The summary says whether this tuner holds the node lock, as
// vgpu_tuner_node_lock_held does: an SRE with two installs on a node sees
// on /tuner which one tunes, and the one that runs without the lock.
func TestTunerPageNodeLock(t *testing.T) {
	for _, c := range []struct {
		name string
		lock tuner.NodeLockState
		html string
		json string
	}{
		{"held", tuner.NodeLockState{Path: "/run/vgpu-exporter/tuner.lock"},
			`<dd id="node-lock" class="ok">held: <code>/run/vgpu-exporter/tuner.lock</code>; a second tuner in enforce on this node exits at start, naming this one</dd>`,
			`{"held":true,"path":"/run/vgpu-exporter/tuner.lock"}`},
		{"recommend", tuner.NodeLockState{NotTaken: tuner.NodeLockNotEnforcing},
			`<dd id="node-lock">not taken: no GPU in enforce mode, and a tuner that changes nothing takes none</dd>`,
			`{"held":false,"not_taken":"not_enforcing"}`},
		{"empty flag", tuner.NodeLockState{NotTaken: tuner.NodeLockNoFile},
			`<dd id="node-lock" class="warn">none: <code>--tuner.node-lock</code> is empty, and nothing keeps another exporter's tuner off this node's GPUs</dd>`,
			`{"held":false,"not_taken":"no_lock_file"}`},
		{"simulator", tuner.NodeLockState{NotTaken: tuner.NodeLockSimulated},
			`<dd id="node-lock">not taken: the simulated GPUs are this exporter's own (<code>--tuner.node-lock</code> not given)</dd>`,
			`{"held":false,"not_taken":"simulated"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, got := summaryOf(t, &tuner.Status{Mode: tuner.ModeEnforce, NodeLock: c.lock}, "node_lock")
			if !strings.Contains(body, c.html) {
				t.Errorf("page has no %s", c.html)
			}
			if got != c.json {
				t.Errorf("JSON node_lock %s, want %s", got, c.json)
			}
		})
	}
	// the tuner off: no tuner, no lock, no line
	if _, body, _ := getPageWith(t, simInfo, nil, nil, "/tuner"); strings.Contains(body, `id="node-lock"`) {
		t.Errorf("the tuner off, a node lock line")
	}
}
