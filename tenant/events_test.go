package tenant

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// seriesPerGPU is how many event counts every known GPU has.
var seriesPerGPU = len(gpu.WellKnownXIDs) + len(gpu.EventKinds)

func TestAddEvents(t *testing.T) {
	r1 := &gpu.Readings{Devices: []gpu.Device{
		{Index: 1, UUID: "GPU-b", Events: []gpu.Event{{Kind: gpu.EventXID, Code: 79}}},
		{Index: 0, UUID: "GPU-a", Events: []gpu.Event{{Kind: gpu.EventXID, Code: 43}, {Kind: gpu.EventXID, Code: 43}, {Kind: gpu.EventOOM}}},
	}}
	r2 := &gpu.Readings{Devices: []gpu.Device{
		// 999 and 7 are not well-known XIDs: both count under XIDOther.
		{Index: 0, UUID: "GPU-a", Events: []gpu.Event{{Kind: gpu.EventXID, Code: 43}, {Kind: gpu.EventXID, Code: 999}, {Kind: gpu.EventXID, Code: 7}}},
		{Index: 1, UUID: "GPU-b"},
		{Index: 2, UUID: "GPU-c"}, // new, no events: seeded at 0
	}}
	tests := []struct {
		name    string
		prev    []EventCount
		r       *gpu.Readings
		gpus    int
		nonzero []EventCount
	}{
		{"nil readings", nil, nil, 0, nil},
		{"no events, counts from 0", nil, &gpu.Readings{Devices: []gpu.Device{{UUID: "GPU-a"}}}, 1, nil},
		{"first", nil, r1, 2, []EventCount{
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventOOM, Total: 1},
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventXID, Code: 43, Total: 2},
			{GPU: 1, UUID: "GPU-b", Kind: gpu.EventXID, Code: 79, Total: 1},
		}},
		{"accumulates", AddEvents(nil, r1), r2, 3, []EventCount{
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventOOM, Total: 1},
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventXID, Code: gpu.XIDOther, Total: 2},
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventXID, Code: 43, Total: 3},
			{GPU: 1, UUID: "GPU-b", Kind: gpu.EventXID, Code: 79, Total: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before []EventCount
			if tc.prev != nil {
				before = append(before, tc.prev...)
			}
			got := AddEvents(tc.prev, tc.r)
			if len(got) != tc.gpus*seriesPerGPU {
				t.Errorf("AddEvents gave %d counts, want %d (%d per GPU)", len(got), tc.gpus*seriesPerGPU, seriesPerGPU)
			}
			var nonzero []EventCount
			for _, e := range got {
				if e.Total > 0 {
					nonzero = append(nonzero, e)
				}
			}
			if !reflect.DeepEqual(nonzero, tc.nonzero) {
				t.Errorf("AddEvents non-zero counts = %+v, want %+v", nonzero, tc.nonzero)
			}
			if tc.prev != nil && !reflect.DeepEqual(tc.prev, before) {
				t.Errorf("AddEvents modified prev: %+v, was %+v", tc.prev, before)
			}
		})
	}
}

// TestAddEventsFromZero checks that every GPU has a count at 0 for each
// well-known XID, for other XIDs and for the other kinds before any event,
// so the first event is an increase.
func TestAddEventsFromZero(t *testing.T) {
	r := &gpu.Readings{Devices: []gpu.Device{{Index: 3, UUID: "GPU-z"}}}
	got := AddEvents(nil, r)
	have := map[[2]any]uint64{}
	for _, e := range got {
		have[[2]any{e.Kind, e.Code}] = e.Total + 1 // +1: present
	}
	want := [][2]any{{gpu.EventXID, gpu.XIDOther}, {gpu.EventOOM, uint64(0)}, {gpu.EventReconf, uint64(0)}}
	for _, x := range gpu.WellKnownXIDs {
		want = append(want, [2]any{gpu.EventXID, x.Code})
	}
	for _, k := range want {
		if have[k] != 1 {
			t.Errorf("count %v: present-at-0 = %v, want present at 0", k, have[k] == 1)
		}
	}
	if again := AddEvents(got, r); !reflect.DeepEqual(again, got) {
		t.Errorf("a second sample without events changed the counts")
	}
	if again := AddEvents(got, r); &again[0] != &got[0] {
		t.Errorf("a second sample without events copied the counts (allocates every sample)")
	}
}

// TestXIDLogNamesTenant: the log line of an XID the driver tied to a
// process names the tenant the sample attributed that process to on the
// GPU; one without a PID, or with a PID not on that GPU, names none.
func TestXIDLogNamesTenant(t *testing.T) {
	cfg, err := LoadConfig("testdata/tenants-mps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	b, err := NewBuilder(cfg, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(1000, 0)), Logger: log.NewLogfmtLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	r := sharedReadings(gpu.SharingTimeSlice, 0)
	r.Devices[0].Events = []gpu.Event{
		{Kind: gpu.EventXID, Code: 13, PID: 3}, // python3, uid 1002: batch
		{Kind: gpu.EventXID, Code: 31, PID: 2}, // vllm: llm
		{Kind: gpu.EventXID, Code: 48},         // no process
		{Kind: gpu.EventXID, Code: 43, PID: 9}, // not on the GPU
	}
	b.Build(r, gpu.SamplerStats{})
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, `msg="XID event"`) {
			_, rest, _ := strings.Cut(line, "xid=")
			got = append(got, strings.Split(rest, " message=")[0])
		}
	}
	want := []string{"13 pid=3 tenant=batch", "31 pid=2 tenant=llm", "48 pid=0", "43 pid=9"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("XID log lines %q, want %q\n%s", got, want, logs.String())
	}
}

// TestXIDLogNamesVMTenant: on a vGPU host the PIDs of processes inside a
// VM are the guest's. An XID naming a host PID names the tenant of the VM
// that PID runs (its QEMU), never the tenant of a guest process that
// happens to have the same PID; a host process sharing its PID with a
// guest's names none (which one is meant cannot be told).
func TestXIDLogNamesVMTenant(t *testing.T) {
	cfg, err := LoadConfig("testdata/tenants-vgpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		processes []gpu.Process
		pid       uint32
		want      string
	}{
		{"a guest's PID", []gpu.Process{{PID: 1234, VGPUInstance: 3, GPUInstanceID: -1, UID: -1}}, 1234, "pid=1234"},
		{"a VM's host process", []gpu.Process{{PID: 1234, VGPUInstance: 3, GPUInstanceID: -1, UID: -1}}, 4002, "pid=4002 tenant=vdi"},
		{"a host process with a guest's PID", []gpu.Process{
			{PID: 1234, VGPUInstance: 3, GPUInstanceID: -1, UID: -1},
			{PID: 1234, Name: "nvidia-smi", GPUInstanceID: -1, UID: -1}}, 1234, "pid=1234"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			b, err := NewBuilder(cfg, BuilderOptions{Clock: gpu.NewManualClock(time.Unix(1000, 0)), Logger: log.NewLogfmtLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			r := &gpu.Readings{Devices: []gpu.Device{{
				Index: 0, UUID: "GPU-0", Up: true, Mode: gpu.SharingVGPU,
				VGPUs: []gpu.VGPUInstance{
					{ID: 1, UUID: "a", VMName: "vdi-1", HostPID: 4002},
					{ID: 3, UUID: "7f3c1a52-0000-4000-8000-000000000001", VMName: "llm"},
				},
				Processes: tc.processes,
				Events:    []gpu.Event{{Kind: gpu.EventXID, Code: 43, PID: tc.pid}},
			}}}
			b.Build(r, gpu.SamplerStats{})
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, `msg="XID event"`) {
					_, rest, _ := strings.Cut(line, "xid=43 ")
					got = append(got, strings.Split(rest, " message=")[0])
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("XID log %q, want %q\n%s", got, tc.want, logs.String())
			}
		})
	}
}
