package kubeevict

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// mover is a simulator actuator that moves processes.
type mover struct{ name string }

func (mover) MoveProcess(context.Context, uint32, string) error { return nil }

func TestOnSimulator(t *testing.T) {
	ok := Options{APIServer: DefaultAPIServer, TokenFile: "t", HTTPClient: http.DefaultClient}
	first, second := mover{"first"}, mover{"second"}
	for _, tc := range []struct {
		name      string
		opts      Options
		actuators []any
		model     gpu.PlacementActuator // nil: an error
		errHas    string
	}{
		{"the first that moves processes", ok, []any{"clocks", first, second}, first, ""},
		{"none moves processes", ok, []any{"clocks"}, nil, ErrNoModel.Error()},
		{"no actuators", ok, nil, nil, ErrNoModel.Error()},
		{"the eviction unusable", Options{APIServer: "http://api:6443", TokenFile: "t", HTTPClient: http.DefaultClient}, []any{first}, nil, "not an https://HOST[:PORT] URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := OnSimulator(tc.opts, tc.actuators...)
			if tc.model == nil {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("error %v, want one with %q", err, tc.errHas)
				}
				if tc.errHas == ErrNoModel.Error() && !errors.Is(err, ErrNoModel) {
					t.Errorf("error %v is not ErrNoModel", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Model != tc.model {
				t.Errorf("moves modelled in %v, want %v", m.Model, tc.model)
			}
			if _, isEvictor := m.Hook.(*Evictor); !isEvictor {
				t.Errorf("hook %T, want the built-in eviction", m.Hook)
			}
		})
	}
}
