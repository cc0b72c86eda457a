package tuner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// StartOff is what a start with the tuner off (no GPU in recommend or
// enforce: the tuner is not built) does with the journal at path, which an
// earlier run that exited uncleanly (a crash, kill -9) may have left
// holding settings it changed. It says what the journal holds and thaws
// the paused tenants among them, as a start in recommend mode does: a
// tuner that decides nothing recovers them (Recover) through the
// executor, over the actuators that actuators returns, and closes their
// originals in the journal. The other settings stay as they are until a
// start with their GPU in enforce restores them.
//
// A journal that holds no pause is only read: no file is made, no lock
// taken, nothing cut or compacted, and actuators is not called. One that
// cannot be read, or opened and locked (another exporter's tuner holds
// its lock, on this mount or another), is logged at error level and thaws
// nothing. Where the actuators drive no pause (actuators' error says why)
// nothing is thawed either: one warning says so, and the originals stay
// open. A thaw that fails is logged, journaled and left open for the next
// start. A journal on a read-only file system is thawed from all the same
// (a tenant left frozen is the worse harm), under its lock: its originals
// cannot be closed there, and a warning says that the next start thaws
// them again. The thaws end by ctx's deadline. It returns the thaws'
// decisions and errors. A nil logger logs nothing.
func StartOff(ctx context.Context, path string, clock gpu.Clock, actuators func() (Actuators, error), logger log.Logger) ([]Decision, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	origs, err := ReadJournalOriginals(path)
	if err != nil {
		level.Error(logger).Log("msg", "the tuner is off; its journal, which may hold settings an earlier run changed and tenants it paused, cannot be read: nothing is thawed", "journal", path, "err", err)
		return nil, err
	}
	paused := pausedTenants(origs)
	const held = "the tuner is off, and its journal holds settings an earlier run changed and did not restore"
	switch {
	case len(origs) == 0:
		return nil, nil
	case len(paused) == 0:
		level.Warn(logger).Log("msg", held+": they stay as they are until a start with their GPU in enforce restores them",
			"journal", path, "originals", len(origs), "paused", 0)
		return nil, nil
	}
	kv := []any{"journal", path, "originals", len(origs), "paused", len(paused), "paused_tenants", strings.Join(paused, ",")}
	j, err := OpenJournal(path)
	if err != nil {
		level.Error(logger).Log(append([]any{"msg", held + "; the paused tenants among them are not thawed: the journal cannot be opened and locked (a tuner holding it thaws them itself); they stay paused until a start that opens it", "err", err}, kv...)...)
		return nil, err
	}
	defer j.Close()
	logJournalOpen(logger, path, j)
	acts, why := actuators()
	if _, ok := actuator[gpu.PauseActuator](acts); !ok {
		err := cmp.Or(why, errors.New("no actuator pauses on this host"))
		level.Warn(logger).Log(append([]any{"msg", held + "; the paused tenants among them are not thawed: no pause actuator on this host; they stay paused until a start that has one thaws them, or a thaw by hand", "reason", err}, kv...)...)
		return nil, fmt.Errorf("paused tenants not thawed: %w", err)
	}
	level.Warn(logger).Log(append([]any{"msg", held + ": thawing the paused tenants among them; the other settings stay as they are until a start with their GPU in enforce restores them"}, kv...)...)
	t, err := New(Options{Policy: noDecisions{}, Actuators: acts, Journal: j, Clock: clock, Mode: ModeOff, Logger: logger})
	if err != nil {
		return nil, err
	}
	d, err := t.Recover(ctx, nil)
	if err != nil {
		level.Error(logger).Log("msg", "the tuner is off, and the paused tenants named in its journal could not all be thawed; tried again at the next start", "journal", path, "err", err)
	}
	if werr := j.Stats().WriteError; werr != "" && slices.ContainsFunc(d, func(d Decision) bool { return d.Applied }) {
		level.Warn(logger).Log("msg", "the tuner is off, and the paused tenants thawed stay open in its journal, which cannot be written: the next start thaws them again", "journal", path, "err", werr)
	}
	return d, err
}

// pausedTenants are the tenants (their targets where unnamed) of the
// pauses among origs.
func pausedTenants(origs []Original) []string {
	var out []string
	for _, o := range origs {
		if o.Target.Knob == gpu.KnobPauseDuty {
			out = append(out, cmp.Or(o.Tenant, o.Target.String()))
		}
	}
	return out
}

// noDecisions is the policy of a tuner that only restores: it decides
// nothing.
type noDecisions struct{}

func (noDecisions) Name() string           { return "none" }
func (noDecisions) Decide(*State) []Action { return nil }
