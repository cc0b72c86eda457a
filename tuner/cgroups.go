package tuner

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A pause freezes the cgroup it finds from a tenant's process (a pod's
// container, a systemd unit), and with it the cgroup's other processes.
// Should that process die while frozen (the OOM killer, kill -9: cgroup
// v2 lets SIGKILL through) and the exporter crash, no PID journaled names
// the cgroup any more, while the rest of it stays frozen. So the pause
// records (original, processes) also name the cgroups the pause actuator
// froze for their PIDs, each by its path and ID (gpu.Cgroup), beside the
// boot ID: a thaw of a pause an earlier run set on this boot thaws each of
// them still there under the same ID, even where every PID is gone (it is
// the cgroup the pause froze, nobody else's); one recreated under the same
// path (another ID) or gone is left alone. A record without them (an
// earlier version wrote it, or a process paused by its process group) is
// thawed by PID alone.

// Bounds of the cgroups a pause record names.
const (
	maxJournalCgroups     = 64
	maxJournalCgroupBytes = 4 << 10 // their paths together
)

// validCgroups checks a record's cgroups: only in a pause's original and
// processes records that name the processes' boot, within bounds, each a
// clean absolute path below its hierarchy's root with an ID.
func validCgroups(r Record) error {
	if len(r.Cgroups) == 0 {
		return nil
	}
	if r.Target.Knob != gpu.KnobPauseDuty || r.Event != EventOriginal && r.Event != EventProcesses || r.Boot == "" {
		return fmt.Errorf("cgroups in a %s record of %s: only a pause's original and processes records name them, with the boot", r.Event, r.Target.Knob)
	}
	if len(r.Cgroups) > maxJournalCgroups || cgroupBytes(r.Cgroups) > maxJournalCgroupBytes {
		return fmt.Errorf("%d cgroups, of %d bytes (at most %d, of %d)", len(r.Cgroups), cgroupBytes(r.Cgroups), maxJournalCgroups, maxJournalCgroupBytes)
	}
	for _, c := range r.Cgroups {
		if !validCgroup(c) {
			return fmt.Errorf("cgroup %q (id %d): not a cgroup below a hierarchy's root", c.Path, c.ID)
		}
	}
	return nil
}

// validCgroup says whether c names a cgroup below a hierarchy's root: an
// ID, and an absolute, clean path other than the root.
func validCgroup(c gpu.Cgroup) bool {
	return c.ID != 0 && c.Path != "/" && strings.HasPrefix(c.Path, "/") && path.Clean(c.Path) == c.Path && !strings.ContainsRune(c.Path, 0)
}

// cgroupBytes is the length of cgs's paths together.
func cgroupBytes(cgs []gpu.Cgroup) int {
	n := 0
	for _, c := range cgs {
		n += len(c.Path)
	}
	return n
}

// cgroupsOf are the cgroups the pause actuator freezes for pids, as
// many as a record holds; none where it tells none (the thaw after a
// crash is then by PID alone).
func (t *Tuner) cgroupsOf(pids []uint32) []gpu.Cgroup {
	ider, ok := t.identifier()
	if !ok || len(pids) == 0 {
		return nil
	}
	cgs, err := ider.Cgroups(pids)
	if err != nil {
		if held, ok := t.unnamedCgroups.NoteAt(t.o.Clock.Now()); ok {
			level.Warn(t.o.Logger).Log("msg", "tuner cannot name the cgroups it pauses: a process of theirs killed while they are frozen, and a crash, leave the others frozen (logged once an hour)", "pids", pidsText(pids), "err", err, "not_logged", held)
		}
		return nil
	}
	out, left := boundCgroups(cgs)
	t.noteCgroupsLeftOut(pids, out, left)
	return out
}

// noteCgroupsLeftOut warns, once an hour, that the cgroups left (valid
// ones a pause of pids freezes) are not journaled with those kept: a
// record holds at most maxJournalCgroups, maxJournalCgroupBytes of paths.
func (t *Tuner) noteCgroupsLeftOut(pids []uint32, kept, left []gpu.Cgroup) {
	if len(left) == 0 {
		return
	}
	if held, ok := t.cgroupsLeftOut.NoteAt(t.o.Clock.Now()); ok {
		level.Warn(t.o.Logger).Log("msg", fmt.Sprintf("tuner journals %d of the %d cgroups it pauses (a record holds %d, of %d bytes of paths): should every process of one left out be killed while it is frozen, and the exporter crash, the next start leaves the rest of that cgroup frozen (logged once an hour)",
			len(kept), len(kept)+len(left), maxJournalCgroups, maxJournalCgroupBytes), "pids", pidsText(pids), "first_left_out", left[0].String(), "not_logged", held)
	}
}

// boundCgroups is cgs (valid ones) as far as a record holds them, and
// the valid ones it left out.
func boundCgroups(cgs []gpu.Cgroup) (out, left []gpu.Cgroup) {
	for _, c := range cgs {
		if !validCgroup(c) {
			continue
		}
		next := append(out[:len(out):len(out)], c)
		if len(next) > maxJournalCgroups || cgroupBytes(next) > maxJournalCgroupBytes {
			left = append(left, c)
			continue
		}
		out = next
	}
	return out, left
}

// unionCgroups is a's cgroups, then those of b it lacks, as far as a
// record holds them, and those it left out (boundCgroups).
func unionCgroups(a, b []gpu.Cgroup) (out, left []gpu.Cgroup) {
	all := append([]gpu.Cgroup(nil), a...)
	for _, c := range b {
		if !slices.Contains(all, c) {
			all = append(all, c)
		}
	}
	return boundCgroups(all)
}

// thawCgroups thaws, once the thaw by PID (a) was applied, the cgroups
// the pause original o names, on the boot it was journaled on: those
// still there under the same ID, even where every PID is gone. where a
// passed over a PID o names, why (returned) says which it thawed.
func (t *Tuner) thawCgroups(ctx context.Context, a Action, o Original, why string) (string, error) {
	if len(o.Cgroups) == 0 || o.Boot == "" {
		return why, nil
	}
	ider, ok := t.identifier()
	if !ok {
		return why, nil
	}
	if boot, _, err := ider.ProcessStarts(nil); err != nil || boot != o.Boot {
		return why, nil // (another boot: its cgroups, and their IDs, are gone with it)
	}
	thawed, err := ider.ThawCgroups(ctx, o.Tenant, o.Cgroups)
	if len(thawed) > 0 && len(a.PIDs) < len(o.PIDs) {
		var names []string
		for _, c := range thawed {
			names = append(names, c.String())
		}
		why = joinReasons(why, "the cgroups it froze thawed: "+strings.Join(names, ", "))
		level.Info(t.o.Logger).Log("msg", "tuner thawed the cgroups a pause froze, whose processes it paused are gone", "target", o.Target.String(), "tenant", o.Tenant, "cgroups", strings.Join(names, ", "))
	}
	if err != nil {
		return why, fmt.Errorf("the cgroups the pause froze: %w", err)
	}
	return why, nil
}
