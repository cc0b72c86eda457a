package tuner

import "testing"

func TestParseGPUModes(t *testing.T) {
	m, err := ParseGPUModes([]string{"0=enforce", "GPU-abc=recommend"})
	if err != nil || m["0"] != ModeEnforce || m["GPU-abc"] != ModeRecommend || len(m) != 2 {
		t.Fatalf("%v, %v", m, err)
	}
	for _, bad := range []string{"0", "=enforce", "0=fast"} {
		if _, err := ParseGPUModes([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
