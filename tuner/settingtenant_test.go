package tuner

import (
	"context"
	"testing"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// An MPS client's setting names the tenant the latest snapshot gives its
// process: after a reload gives PID 7 to another tenant, the cap the
// tuner set on it is that tenant's on /tuner and in the tuner's gauges, as
// the client's row and the tenant metrics say, not the tenant the cap was
// set for.
func TestSettingNamesTheProcessTenantNow(t *testing.T) {
	for _, c := range []struct {
		name  string
		usage []tenant.Usage // of the second round
		want  string
	}{
		{"same tenant", []tenant.Usage{{Tenant: "embed", UUID: uuid0, PIDs: []uint32{7}}}, "embed"},
		{"renamed by a reload", []tenant.Usage{{Tenant: "embed2", UUID: uuid0, PIDs: []uint32{7}}}, "embed2"},
		{"the process unassigned", []tenant.Usage{{Tenant: tenant.Unassigned, UUID: uuid0, PIDs: []uint32{7}}}, tenant.Unassigned},
		{"no usage listed", nil, "embed"},
		{"PID 7 on another GPU only", []tenant.Usage{{Tenant: "embed2", UUID: "GPU-other", PIDs: []uint32{7}}}, "embed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, []Action{mpsAction(7, 1, 0.4)}, nil)
			devs := func() []gpu.Device {
				return []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(7, nil)}}}
			}
			ctx := context.Background()
			if _, err := tu.RunOnce(ctx, snapshot(clk.Now(), devs(), []tenant.Usage{{Tenant: "embed", UUID: uuid0, PIDs: []uint32{7}}})); err != nil {
				t.Fatal(err)
			}
			clk.Advance(15 * time.Second)
			if _, err := tu.RunOnce(ctx, snapshot(clk.Now(), devs(), c.usage)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range tu.Status().Settings {
				if s.Knob == gpu.KnobMPSActiveThreads && s.PID == 7 {
					got = append(got, s.Tenant)
				}
			}
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("PID 7's MPS setting names tenants %q, want %q", got, c.want)
			}
		})
	}
}

// An MPS client listed for two tenants on its GPU (a process with a
// context in each of two MIG instances a selector gives different
// tenants) is named alike by its setting and by the history's point of
// the same round: the tenant the last usage lists it under.
func TestSettingTenantAsTheHistory(t *testing.T) {
	tu, clk := newTestTuner(t, ModeEnforce, &recorder{}, []Action{mpsAction(7, 1, 0.4)}, nil)
	half := 0.5
	devs := []gpu.Device{{UUID: uuid0, Up: true, Mode: gpu.SharingMPS, Processes: []gpu.Process{mpsProc(7, &half)}}}
	usage := []tenant.Usage{{Tenant: "embed", UUID: uuid0, GPUInstance: "1", PIDs: []uint32{7}}, {Tenant: "embed2", UUID: uuid0, GPUInstance: "2", PIDs: []uint32{7}}}
	if _, err := tu.RunOnce(context.Background(), snapshot(clk.Now(), devs, usage)); err != nil {
		t.Fatal(err)
	}
	s := tu.Status()
	var setting []string
	for _, st := range s.Settings {
		if st.Knob == gpu.KnobMPSActiveThreads && st.PID == 7 {
			setting = append(setting, st.Tenant)
		}
	}
	var point []string
	if len(s.History) > 0 {
		for k := range s.History[len(s.History)-1].Values {
			if k.Knob == gpu.KnobMPSActiveThreads && k.PID == 7 {
				point = append(point, k.Tenant)
			}
		}
	}
	if len(setting) != 1 || len(point) != 1 || setting[0] != point[0] || setting[0] != "embed2" {
		t.Errorf("PID 7's setting names %q, the history's point %q; want both embed2", setting, point)
	}
}
