package webui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// A revert or a restore waiting for a hook of its tenant is on its GPU's
// line, as HTML and as JSON (hook_waits), from the tuner's status alone;
// where the round's line says it already, the HTML does not say it twice.
// (Before, the page said nothing of it.)
func TestTunerPageHookWaits(t *testing.T) {
	since := pageTime.Add(-40 * time.Second)
	revert := tuner.HookWait{GPU: "GPU-aaaa", Tenant: "chat", Knob: gpu.KnobMPSActiveThreads, PID: 42, From: "100%", To: "40%",
		Hook: tuner.HookRun{GPU: "GPU-bbbb", GPUIndex: 1, Tenant: "chat", Knob: gpu.KnobMPSActiveThreads, PID: 43, Since: since}}
	restore := tuner.HookWait{GPU: "GPU-aaaa", Tenant: "search", Knob: gpu.KnobMPSActiveThreads, PID: 44, Restore: true, From: "30%", To: "100%",
		Hook: tuner.HookRun{GPU: "GPU-bbbb", GPUIndex: 1, Tenant: "chat", Knob: gpu.KnobPlacement, Plan: true, Since: since}}
	st := &tuner.Status{Mode: tuner.ModeEnforce, LastRun: pageTime, HookWaits: []tuner.HookWait{revert, restore},
		GPUs: []tuner.GPURound{{GPU: "GPU-aaaa", Kind: tuner.RoundWaiting, Why: revert.Why(pageTime) + " (and 1 more)"}}}
	_, body, _ := getPage(t, pageSnapshot(), st, "/tuner")
	at := since.UTC().Format("15:04:05")
	line := "revert of mps_active_threads of chat 100% → 40% waits for chat&#39;s restart hook on GPU 1, running since " + at + " UTC (40s; due, judged once that hook is settled)"
	if !strings.Contains(body, `<b>holding</b> because `+line+` (and 1 more)<br><span class="warn hook-wait">waiting: restore of mps_active_threads of search 30% → 100% waits for the rebalancing plan moving search, started on GPU 1, running since `+at+` UTC (40s; of PID 44, started once that hook is settled)</span></td>`) {
		t.Errorf("GPU 0's line lacks the restore's wait, or says the revert's twice:\n%s", body)
	}
	if strings.Count(body, "waits for chat&#39;s restart hook") != 1 {
		t.Errorf("the revert's wait said %d times, want once", strings.Count(body, "waits for chat&#39;s restart hook"))
	}
	_, js, _ := getPage(t, pageSnapshot(), st, "/tuner?format=json")
	var v struct {
		GPUs []struct {
			Index     int             `json:"index"`
			HookWaits json.RawMessage `json:"hook_waits"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.GPUs) != 2 || v.GPUs[1].HookWaits != nil {
		t.Fatalf("GPUs %+v, want GPU 1 without waits", v.GPUs)
	}
	var got []map[string]any
	if err := json.Unmarshal(v.GPUs[0].HookWaits, &got); err != nil || len(got) != 2 {
		t.Fatalf("GPU 0's hook_waits %s (%v), want two", v.GPUs[0].HookWaits, err)
	}
	var compact bytes.Buffer
	delete(got[0], "text")
	b, _ := json.Marshal(got[0])
	_ = json.Compact(&compact, b)
	want := `{"from":"100%","knob":"mps_active_threads","pid":42,"tenant":"chat","to":"40%","waits_for":{"gpu_index":1,"gpu_uuid":"GPU-bbbb","kind":"restart","running_since":"` + since.Format(time.RFC3339) + `","tenant":"chat"},"what":"revert"}`
	if compact.String() != want {
		t.Errorf("revert's JSON\n %s\nwant %s", compact.String(), want)
	}
	if got[1]["what"] != "restore" || got[1]["waits_for"].(map[string]any)["kind"] != "plan" || !strings.HasPrefix(got[1]["text"].(string), "restore of mps_active_threads of search") {
		t.Errorf("restore's JSON %v", got[1])
	}
}
