package tuner

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// An MPS client's cap is set back by restarting the client through the
// operator's restart hook, by PID (the hook usually kills it and
// launches it again), at exit or, after a crash, at the next start. By
// then the PID may name another process: the client exited and its PID
// was taken again, or the host rebooted. So an MPS original also names
// its client, as a pause's does its processes (identity.go): the boot ID
// and the client's start time, as the MPS actuator reads them
// (gpu.ProcessStarter: the host's procfs) just before the cap is first
// changed, or as the client's successor is followed. A restore passes
// over a PID whose process is not the one journaled (another boot,
// another start time, or none running) and closes its original as gone;
// it leaves for the next start one whose identity it cannot read now
// (clientGone), and restores by PID one listed on the GPU where the procfs
// root shows none of the GPU's other processes (that root is not the
// host's: rootBlind). An original without
// them (an earlier version wrote it, or an older one compacted it, an
// actuator that tells no processes apart, one that could not tell then)
// is restored by PID, as before.
//
// The journal keeps it in a field of its own, "client", not in the
// "boot" and "starts" of a pause's records: an older version refuses
// those in any record but a pause's, and would drop the original as
// invalid, never to set that cap back; it ignores a field it does not
// know, and restores the original by PID.

// ClientIdentity names an MPS client in its original record: the boot ID
// of the host it ran on and its start time in clock ticks after that boot.
type ClientIdentity struct {
	Boot  string `json:"boot"`
	Start uint64 `json:"start"`
}

// withIdentity is r with id journaled in the field r's knob keeps it in:
// an MPS client's in Client (one process; none where id names none), any
// other's in Identity.
func (r Record) withIdentity(id Identity) Record {
	if r.Target.Knob != gpu.KnobMPSActiveThreads {
		r.Identity = id
	} else if id.Boot != "" && len(id.Starts) == 1 {
		r.Client = &ClientIdentity{Boot: id.Boot, Start: id.Starts[0]}
	}
	return r
}

// identity is the identity r journals, wherever withIdentity put it.
func (r Record) identity() Identity {
	if c := r.Client; c != nil {
		return Identity{Boot: c.Boot, Starts: []uint64{c.Start}}
	}
	return r.Identity
}

// validClient checks a record's client identity: only in an MPS client's
// original, with a target PID, a boot ID that is a UUID and a start time
// within bounds (0 is no process).
func validClient(r Record) error {
	c := r.Client
	if c == nil {
		return nil
	}
	if r.Target.Knob != gpu.KnobMPSActiveThreads || r.Event != EventOriginal || r.Target.PID == 0 {
		return fmt.Errorf("client identity (\"client\") in a %s record of %s: only an MPS client's original, naming its PID, has one", r.Event, r.Target)
	}
	if !bootIDPattern.MatchString(c.Boot) {
		return fmt.Errorf("client identity (\"client\"): boot ID %q is not a UUID", c.Boot)
	}
	if c.Start == 0 || c.Start > maxJournalTicks {
		return fmt.Errorf("client identity (\"client\"): start time %d out of range (1 to 2^48)", c.Start)
	}
	return nil
}

// clientStarter is the MPS actuator where it tells processes apart.
func (t *Tuner) clientStarter() (gpu.ProcessStarter, bool) {
	m, _ := actuator[gpu.MPSActuator](t.o.Actuators)
	s, ok := m.(gpu.ProcessStarter)
	return s, ok
}

// clientStart reads the boot ID and the start time of the process pid
// now (0: not running); false where the MPS actuator cannot tell (err
// says why, nil where it is not set up to).
func (t *Tuner) clientStart(pid uint32) (boot string, start uint64, ok bool, err error) {
	s, has := t.clientStarter()
	if !has || pid == 0 {
		return "", 0, false, nil
	}
	boot, starts, err := s.ProcessStarts([]uint32{pid})
	if errors.Is(err, gpu.ErrNotSupported) {
		return "", 0, false, nil
	}
	if err == nil && (!bootIDPattern.MatchString(boot) || len(starts) != 1 || starts[0] > maxJournalTicks) {
		err = fmt.Errorf("boot ID %q and %d start times for PID %d", boot, len(starts), pid)
	}
	if err != nil {
		return "", 0, false, err
	}
	return boot, starts[0], true, nil
}

// clientIdentity is the identity of the MPS client pid, read now, to be
// journaled with its original; empty where the actuator tells none, or
// cannot now, or sees no process of that PID (the original is then
// restored by PID, as one of an earlier version), which is warned, once
// an hour.
func (t *Tuner) clientIdentity(pid uint32) Identity {
	return t.readClientIdentity(pid, false)
}

// successorIdentity is clientIdentity for the successor an original
// follows: a PID that runs nothing (a named successor not up yet, a
// wrapper's PID) is said at debug level, not in the hourly warning, which
// is left for a cap changed on a client the tuner cannot tell.
func (t *Tuner) successorIdentity(pid uint32) Identity {
	return t.readClientIdentity(pid, true)
}

func (t *Tuner) readClientIdentity(pid uint32, successor bool) Identity {
	boot, start, ok, err := t.clientStart(pid)
	if ok && start == 0 {
		if successor {
			level.Debug(t.o.Logger).Log("msg", "the MPS client's successor the tuner follows runs no process under the procfs root (--proc.root): its original is journaled without identity, restored by PID", "pid", pid)
			return Identity{}
		}
		ok, err = false, fmt.Errorf("no process %d under the procfs root (--proc.root)", pid)
	}
	if !ok {
		if err != nil {
			if held, log := t.unidentifiedClients.NoteAt(t.o.Clock.Now()); log {
				level.Warn(t.o.Logger).Log("msg", "tuner cannot tell the MPS client whose cap it changes from a later process of the same PID: a restore after a crash restarts whatever holds that PID then (logged once an hour)", "pid", pid, "err", err, "not_logged", held)
			}
		}
		return Identity{}
	}
	return Identity{Boot: boot, Starts: []uint64{start}}
}

// clientGone says why the PID of the MPS original o names a process other
// than the client journaled with it, or none: "" where it still names
// that client, or o names none, or the actuator cannot tell now. listed
// is whether the latest snapshot lists the PID on its GPU: a listed PID
// the procfs root shows no process of, or another, is not gone where the
// root shows none of the GPU's other processes (rootBlind: another PID
// namespace than the host's, or hidepid), and it cannot tell: restored
// by PID, as one without identity, and said. left says why it is not restored now: the identity
// journaled cannot be read (the boot ID or the start time unreadable), and
// a restart by PID could restart another tenant's process, which is worse
// than a cap left until the next start (as a PID no snapshot tells
// running is).
func (t *Tuner) clientGone(o Original, listed bool) (gone string, left error) {
	if o.Boot == "" || len(o.Starts) != 1 {
		return "", nil
	}
	boot, start, ok, err := t.clientStart(o.Target.PID)
	switch {
	case err != nil:
		return "", fmt.Errorf("the identity of PID %d journaled with its original cannot be read now (%w), and a client restart by PID could restart another process: left for the next start", o.Target.PID, err)
	case !ok:
		return "", nil // (the actuator is not set up to tell)
	case boot != o.Boot:
		return "journaled before the host's last boot", nil
	case start != o.Starts[0] && listed && t.rootBlind(o.Target, start == 0):
		level.Warn(t.o.Logger).Log("msg", "--proc.root does not show the GPU's processes (those listed on the GPU are not under it: the exporter not in the host's PID namespace, or /proc mounted with hidepid): the tuner cannot tell the client from a later process of the same PID, and restarts the PID to set its cap back",
			"target", o.Target.String(), "tenant", o.Tenant, "pid", o.Target.PID)
		return "", nil
	case start != o.Starts[0]:
		return "another process holds it now, or none", nil
	}
	return "", nil
}

// rootBlind reports whether the procfs root does not show the processes
// the latest snapshot lists on tg's GPU, judged by the others than tg's
// PID, whose own number tells nothing (another PID namespace may hold
// another process under it): blind where it shows none of them; where
// the snapshot lists no other, or they cannot be read, unknown, which is
// blind where the root shows no process of tg's PID (none, as before).
func (t *Tuner) rootBlind(tg Target, none bool) bool {
	var others []uint32
	if t.last == nil || t.last.Readings == nil {
		return none
	}
	if d := t.last.Readings.DeviceByUUID(tg.GPU); d != nil {
		for _, p := range d.Processes {
			if p.PID != tg.PID && p.PID != 0 {
				others = append(others, p.PID)
			}
		}
	}
	s, ok := t.clientStarter()
	if !ok || len(others) == 0 {
		return none
	}
	_, starts, err := s.ProcessStarts(others)
	if err != nil || len(starts) != len(others) {
		return none
	}
	return !slices.ContainsFunc(starts, func(st uint64) bool { return st != 0 })
}

// closeGoneClient closes the MPS original k, whose PID no longer names
// its client (gone, clientGone's), without restarting what holds the PID
// now, and warns.
func (t *Tuner) closeGoneClient(k, gone string, now time.Time) {
	o := t.originals[k]
	t.closeOriginal(k, now, fmt.Sprintf("process gone, not restarted: PID %d (%s); nothing to restore", o.Target.PID, gone))
	level.Warn(t.o.Logger).Log("msg", "an MPS client whose cap the tuner changed is gone, its PID another's or nobody's: the process that PID names now is not restarted", "target", o.Target.String(), "tenant", o.Tenant, "pid", o.Target.PID, "gone", gone)
}
