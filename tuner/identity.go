package tuner

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A pause is journaled with its processes' PIDs, for the thaw after a
// crash. A PID is taken again once its process exits, and a reboot starts
// them over, while the journal outlives both: by the next start a PID may
// name another process, in a cgroup someone else froze (`docker pause`,
// `systemctl freeze`) or a process group someone else stopped, which a
// thaw by PID would let go. So the pause records (original, processes)
// also name the processes: the host's boot ID and each PID's start time,
// as the pause actuator reads them (gpu.ProcessIdentifier: the host's
// freezer does), and a thaw passes over a PID whose process is not the
// one paused (another boot, another start time, or none running): that
// tenant's process is gone, and the group the PID is in now is not
// touched (the cgroup the pause froze for it is thawed by its journaled
// ID: cgroups.go). A record without them (an earlier
// version wrote it, or an actuator that tells no processes apart) is
// thawed by PID, as before.

// Identity names the processes of a pause record, beside its PIDs: the
// boot ID of the host they ran on and, in the order of the PIDs, their
// start times in clock ticks after that boot (0: not running when
// journaled). Empty where unknown.
type Identity struct {
	Boot   string   `json:"boot,omitempty"`
	Starts []uint64 `json:"starts,omitempty"`
	// Cgroups are those the pause actuator froze for the PIDs, on Boot
	// (cgroups.go).
	Cgroups []gpu.Cgroup `json:"cgroups,omitempty"`
}

// maxJournalTicks bounds a start time the journal accepts: clock ticks
// after boot, far beyond any uptime.
const maxJournalTicks = 1 << 48

// bootIDPattern is a boot ID: a UUID, as the kernel writes it.
var bootIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// validIdentity checks a record's identity: only beside the PIDs of a
// pause record (original, processes), one start time per PID, each within
// bounds, and a boot ID that is a UUID. (An MPS client's is journaled in
// a field of its own: validClient.)
func validIdentity(r Record) error {
	if r.Boot == "" && len(r.Starts) == 0 {
		return nil
	}
	if r.Target.Knob != gpu.KnobPauseDuty || r.Event != EventOriginal && r.Event != EventProcesses {
		return fmt.Errorf("process start times in a %s record of %s: only a pause's original and processes records have them", r.Event, r.Target.Knob)
	}
	if !bootIDPattern.MatchString(r.Boot) {
		return fmt.Errorf("boot ID %q is not a UUID", r.Boot)
	}
	if len(r.Starts) != len(r.PIDs) || len(r.PIDs) == 0 {
		return fmt.Errorf("%d start times for %d processes", len(r.Starts), len(r.PIDs))
	}
	for _, s := range r.Starts {
		if s > maxJournalTicks {
			return fmt.Errorf("start time %d out of range", s)
		}
	}
	return nil
}

// start is the start time journaled for pid; false where none is.
func (id Identity) start(pids []uint32, pid uint32) (uint64, bool) {
	i := slices.Index(pids, pid)
	if id.Boot == "" || i < 0 || i >= len(id.Starts) {
		return 0, false
	}
	return id.Starts[i], true
}

// identifier is the pause actuator where it tells processes apart.
func (t *Tuner) identifier() (gpu.ProcessIdentifier, bool) {
	p, ok := actuator[gpu.PauseActuator](t.o.Actuators)
	if !ok {
		return nil, false
	}
	id, ok := p.(gpu.ProcessIdentifier)
	return id, ok
}

// identify reads the identity of pids now; empty where the pause
// actuator tells no processes apart, or cannot now (the record is then
// thawed by PID, as one of an earlier version).
func (t *Tuner) identify(pids []uint32) Identity {
	ider, ok := t.identifier()
	if !ok {
		return Identity{}
	}
	boot, starts, err := ider.ProcessStarts(pids)
	if err == nil && (!bootIDPattern.MatchString(boot) || len(starts) != len(pids)) {
		err = fmt.Errorf("boot ID %q and %d start times for %d processes", boot, len(starts), len(pids))
	}
	if err != nil {
		if held, ok := t.unidentified.NoteAt(t.o.Clock.Now()); ok {
			level.Warn(t.o.Logger).Log("msg", "tuner cannot tell the processes it pauses from later ones of the same PIDs: a thaw after a crash lets go whatever holds those PIDs then (logged once an hour)", "pids", pidsText(pids), "err", err, "not_logged", held)
		}
		return Identity{}
	}
	return Identity{Boot: boot, Starts: starts}
}

// identityFor is the identity of pids, the processes a pause original o
// holds from now on: those o names keep the start times journaled with
// them (a process read again now may be another), the others are read
// now, and so are the cgroups a pause of pids freezes. Empty where o's
// processes were journaled without theirs.
func (t *Tuner) identityFor(o Original, pids []uint32) Identity {
	if len(pids) == 0 || o.Boot == "" && len(o.PIDs) > 0 {
		return Identity{}
	}
	var fresh []uint32
	for _, p := range pids {
		if !slices.Contains(o.PIDs, p) {
			fresh = append(fresh, p)
		}
	}
	id := o.Identity
	if len(fresh) > 0 || id.Boot == "" {
		if id = t.identify(fresh); id.Boot == "" {
			return Identity{}
		}
	}
	out := Identity{Boot: id.Boot, Starts: make([]uint64, len(pids))}
	for i, p := range pids {
		if s, ok := id.start(fresh, p); ok {
			out.Starts[i] = s
		} else if o.Boot == out.Boot {
			out.Starts[i], _ = o.start(o.PIDs, p)
		} // else a process of an earlier boot: 0, gone
	}
	out.Cgroups = t.cgroupsOf(t.confirmed(o, pids, fresh, out.Boot))
	return out
}

// confirmed are those of pids whose processes are the ones the pause
// record names, so that the cgroups looked up from them are the pause's:
// those just read (fresh) and those o names whose start time, read again
// now, is still the one journaled on this boot. A PID another process
// holds by now would give its cgroup, which the pause never froze.
func (t *Tuner) confirmed(o Original, pids, fresh []uint32, boot string) []uint32 {
	out := slices.Clone(fresh)
	var old []uint32
	for _, p := range pids {
		if !slices.Contains(fresh, p) {
			old = append(old, p)
		}
	}
	if len(old) == 0 || o.Boot != boot {
		return out
	}
	now := t.identify(old)
	if now.Boot != boot {
		return out
	}
	for i, p := range old {
		if was, ok := o.start(o.PIDs, p); ok && was != 0 && now.Starts[i] == was {
			out = append(out, p)
		}
	}
	return out
}

// samePaused narrows a, the thaw of the pause original o, to those of
// its processes that are still the ones o paused, where o names them
// (Identity), and adds to why (a's reason, returned) those passed over:
// gone (what is left of their cgroups, thawCgroups thaws). The target's PID is then no
// fallback (pausedPIDs): a thaw with none left thaws only what the
// actuator holds of the tenant itself. Where the actuator cannot tell
// now, a is left as it is.
func (t *Tuner) samePaused(a Action, o Original, why string) (Action, string) {
	if o.Boot == "" {
		return a, why
	}
	now := t.identify(o.PIDs)
	if now.Boot == "" {
		return a, why
	}
	keep := []uint32{}
	var gone []string
	for i, p := range o.PIDs {
		was, _ := o.start(o.PIDs, p)
		switch {
		case o.Boot != now.Boot:
			gone = append(gone, strconv.FormatUint(uint64(p), 10)+" (paused before the host's last boot)")
		case was == 0 || now.Starts[i] != was:
			gone = append(gone, strconv.FormatUint(uint64(p), 10)+" (another process holds it now, or none)")
		default:
			keep = append(keep, p)
		}
	}
	if len(gone) == 0 {
		return a, why
	}
	a.PIDs, a.PID = keep, 0
	why = joinReasons(why, "process gone, not thawed: PID "+strings.Join(gone, ", "))
	a.Reason = why
	level.Warn(t.o.Logger).Log("msg", "a process the tuner paused is gone, its PID another's or nobody's: the group that PID is in now is not thawed", "target", o.Target.String(), "tenant", o.Tenant, "gone", strings.Join(gone, ", "))
	return a, why
}
