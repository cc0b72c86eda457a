package tuner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A start with the tuner off thaws the tenants the journal holds paused,
// through the executor, and closes their originals; the other settings
// stay open, and no actuator is asked for where nothing is paused (the
// journal then read only). A journal another tuner holds, or a thaw that
// fails, thaws nothing and leaves the pause open for the next start.
func TestStartOff(t *testing.T) {
	pause := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPauseDuty, PID: 7},
		Tenant: "train", From: encodeValue(Duty(0)), PIDs: []uint32{7, 8}}
	power := Record{Time: t0, Event: EventOriginal, Target: Target{GPU: uuid0, Knob: gpu.KnobPowerLimit}, From: encodeValue(Watts(700))}
	thaw := []string{"SetPauseDuty(GPU-0,train,[7 8],0)"}
	for _, c := range []struct {
		name    string
		recs    []Record // nil: no journal
		held    bool     // another tuner holds the journal
		fail    int      // the first calls that fail
		calls   []string // the pause actuator's
		open    string   // the knobs left open
		err     string
		log     string
		asked   bool // for the actuators
		noPause bool // the actuators drive no pause
		touched bool // the journal file written
	}{
		{name: "a pause and a power limit", recs: []Record{power, pause}, calls: thaw, open: "[power_limit]", log: "paused_tenants=train", asked: true, touched: true},
		{name: "a pause", recs: []Record{pause}, calls: thaw, open: "[]", log: "paused=1", asked: true, touched: true},
		{name: "no pause", recs: []Record{power}, open: "[power_limit]", log: "paused=0"},
		{name: "no journal", open: "[]"},
		{name: "held by another tuner", recs: []Record{pause}, held: true, open: "[pause_duty]", err: "in use by another process", log: "cannot be opened and locked"},
		{name: "no pause actuator", recs: []Record{power, pause}, noPause: true, open: "[pause_duty power_limit]", err: "no freezer here", log: "not thawed: no pause actuator", asked: true},
		{name: "the thaw fails", recs: []Record{power, pause}, fail: 1, calls: []string{"failed"}, open: "[pause_duty power_limit]", err: "thaw failed", log: "could not all be thawed", asked: true, touched: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			if c.recs != nil {
				if err := writeJournal(t, path, c.recs...).Close(); err != nil {
					t.Fatal(err)
				}
			}
			var before []byte // (no journal: none)
			if c.recs != nil {
				before = readFile(t, path)
			}
			if c.held {
				j := openJournal(t, path)
				defer j.Close()
			}
			rec := &flakyPause{fail: c.fail}
			asked := false
			var logs strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := StartOff(ctx, path, gpu.NewManualClock(t0.Add(time.Hour)), func() (Actuators, error) {
				asked = true
				if c.noPause {
					return ActuatorsOf(), errors.New("no freezer here")
				}
				return ActuatorsOf(rec), nil
			}, log.NewLogfmtLogger(&logs))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("error %v, want %q", err, c.err)
			}
			if !slices.Equal(rec.Calls, c.calls) {
				t.Errorf("calls %q, want %q", rec.Calls, c.calls)
			}
			if asked != c.asked {
				t.Errorf("actuators asked for: %v, want %v", asked, c.asked)
			}
			if !strings.Contains(logs.String(), c.log) {
				t.Errorf("no %q in the log:\n%s", c.log, logs.String())
			}
			origs, err := ReadJournalOriginals(path)
			if err != nil {
				t.Fatal(err)
			}
			var open []string
			for _, o := range origs {
				open = append(open, string(o.Target.Knob))
			}
			slices.Sort(open)
			if got := fmt.Sprint(open); got != c.open {
				t.Errorf("open originals %s, want %s", got, c.open)
			}
			after, err := os.ReadFile(path)
			if c.recs == nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a journal made where there was none: %q, %v", after, err)
			}
			if c.recs != nil && err != nil {
				t.Errorf("reading the journal %s after the thaw: %v", path, err)
			}
			if touched := string(after) != string(before); touched != c.touched {
				t.Errorf("journal written: %v, want %v", touched, c.touched)
			}
		})
	}
}
