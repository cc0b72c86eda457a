package tuner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
)

// containsAll reports whether a line of s holds each of want.
func containsAll(s string, want []string) bool {
	for _, l := range strings.Split(s, "\n") {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// A close or a release that fails after a restore that set everything
// back is logged under its own message, not as settings NOT restored,
// and still makes the exit's error. (It was logged as "original settings
// NOT restored", and the SRE chased settings that were set back.)
func TestExitCloseFailureNotLoggedAsNotRestored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(rn *Runner)
		want  string
	}{
		{"release", func(rn *Runner) {
			rn.ReleaseAtExit(&pathLock{path: "/run/vgpu-exporter/tuner.lock", release: func() error { return errors.New("bad file descriptor") }})
		}, "releasing the node lock /run/vgpu-exporter/tuner.lock: bad file descriptor"},
		{"close", func(rn *Runner) {
			rn.CloseAtExit(closeFunc(func() error { return errors.New("thaw tenant-a: device busy") }))
		}, "thaw tenant-a: device busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rn := exitRunnerEnded(t, 2*time.Second)
			var logs lockedBuffer
			rn.logger = log.NewLogfmtLogger(&logs)
			tc.setup(rn)
			err := rn.RestoreAtExit()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RestoreAtExit: %v, want %q (a non-zero exit)", err, tc.want)
			}
			if l := logs.String(); strings.Contains(l, "NOT restored") || !containsAll(l, []string{"level=error", "did not close or could not be released", tc.want}) {
				t.Errorf("log:\n%s\nwant the failure under its own message, no \"NOT restored\"", l)
			}
		})
	}
}
