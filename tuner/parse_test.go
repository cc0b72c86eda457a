package tuner

import (
	"strings"
	"testing"
)

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

// A GPU given two modes is refused, whatever the two.
func TestParseGPUModesTwice(t *testing.T) {
	for _, vs := range [][]string{{"0=enforce", "0=off"}, {"GPU-a=recommend", "GPU-a=recommend"}} {
		if _, err := ParseGPUModes(vs); err == nil || !strings.Contains(err.Error(), "a mode twice") {
			t.Errorf("%q: %v, want refused as a mode given twice", vs, err)
		}
	}
}
