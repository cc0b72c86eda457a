package tenant

import (
	"reflect"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func TestAddEvents(t *testing.T) {
	r1 := &gpu.Readings{Devices: []gpu.Device{
		{Index: 1, UUID: "GPU-b", Events: []gpu.Event{{Kind: gpu.EventXID, Code: 79}}},
		{Index: 0, UUID: "GPU-a", Events: []gpu.Event{{Kind: gpu.EventXID, Code: 43}, {Kind: gpu.EventXID, Code: 43}, {Kind: gpu.EventOOM}}},
	}}
	r2 := &gpu.Readings{Devices: []gpu.Device{
		{Index: 0, UUID: "GPU-a", Events: []gpu.Event{{Kind: gpu.EventXID, Code: 43}}},
		{Index: 1, UUID: "GPU-b"},
	}}
	tests := []struct {
		name string
		prev []EventCount
		r    *gpu.Readings
		want []EventCount
	}{
		{"nil readings", nil, nil, nil},
		{"no events", nil, &gpu.Readings{Devices: []gpu.Device{{UUID: "GPU-a"}}}, nil},
		{"first", nil, r1, []EventCount{
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventOOM, Total: 1},
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventXID, Code: 43, Total: 2},
			{GPU: 1, UUID: "GPU-b", Kind: gpu.EventXID, Code: 79, Total: 1},
		}},
		{"accumulates", AddEvents(nil, r1), r2, []EventCount{
			{GPU: 0, UUID: "GPU-a", Kind: gpu.EventOOM, Total: 1},
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
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("AddEvents = %+v, want %+v", got, tc.want)
			}
			if tc.prev != nil && !reflect.DeepEqual(tc.prev, before) {
				t.Errorf("AddEvents modified prev: %+v, was %+v", tc.prev, before)
			}
		})
	}
}
