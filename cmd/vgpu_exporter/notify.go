package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// Where systemd starts the exporter as a Type=notify service (it sets
// NOTIFY_SOCKET), the exporter tells it when it serves (READY=1: systemd's
// start, and a reload, wait for it; a start that fails before it fails
// `systemctl start`) and when it stops (STOPPING=1). With each of the
// start and the stop it says how long it may take (EXTEND_TIMEOUT_USEC):
// systemd then waits that long where it is longer than the unit's
// TimeoutStartSec or TimeoutStopSec, so that a --tuner.restore-timeout
// raised for a slow restart hook is not cut by a stop timeout left at its
// default (a stop killed mid-restore leaves the tuner's settings to the
// next start). Elsewhere (no NOTIFY_SOCKET: a container, a shell) nothing
// is sent.

// extendMargin is added to each bound said to systemd: the time the
// process takes beyond the waits the bound counts.
const extendMargin = 5 * time.Second

// backendStartAllowance is what startBound gives the backend's start:
// NVML's initialization has no bound of its own (an estimate).
const backendStartAllowance = time.Minute

// startBound is the longest the start may take before it serves: the
// thaw of an earlier run's pauses (tuner off) or the actuators' detection
// (detectTimeout), each after the backend's start.
func startBound(c *config) time.Duration {
	return backendStartAllowance + max(c.Tuner.RestoreTimeout, detectTimeout)
}

// stopBound is the longest the shutdown may take (serve): with a tuner,
// its restore, then the wait for what its exit left running and the
// backend's close; without, shutdownTimeout.
func stopBound(restore time.Duration, tuner bool) time.Duration {
	if !tuner {
		return shutdownTimeout
	}
	return max(shutdownTimeout, restore+lateAfterRestore+closeAfterRestore)
}

// extend is the EXTEND_TIMEOUT_USEC line for bound (and extendMargin).
func extend(bound time.Duration) string {
	return fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", (bound + extendMargin).Microseconds())
}

// notifyStarting tells systemd how long the start may take (startBound).
func notifyStarting(logger log.Logger, c *config) { sdNotify(logger, extend(startBound(c))) }

// notifyReadyOnServe returns what makes the servers it is called with
// tell systemd, once, that the exporter is ready, as the first of them
// accepts on its listener (http.Server calls BaseContext as each Serve
// begins, the listener open and the web configuration applied).
func notifyReadyOnServe(logger log.Logger) func(*http.Server) {
	var once sync.Once
	return func(server *http.Server) { notifyOnceOnServe(server, &once, logger) }
}

func notifyOnceOnServe(server *http.Server, once *sync.Once, logger log.Logger) {
	base := server.BaseContext
	server.BaseContext = func(l net.Listener) context.Context {
		once.Do(func() { sdNotify(logger, daemon.SdNotifyReady) })
		if base != nil {
			return base(l)
		}
		return context.Background()
	}
}

// sdNotify sends state to systemd where it asked for one (NOTIFY_SOCKET);
// a failure to send is logged, not fatal: the service goes on.
func sdNotify(logger log.Logger, state string) {
	sent, err := daemon.SdNotify(false, state)
	switch {
	case err != nil:
		level.Warn(logger).Log("msg", "could not tell systemd the service's state (NOTIFY_SOCKET)", "state", state, "err", err)
	case sent:
		level.Debug(logger).Log("msg", "told systemd the service's state", "state", state)
	}
}

// notifyStopping tells systemd the service is stopping, within bound
// (stopBound): it sets the tuner's settings back and closes the backend
// before it exits.
func notifyStopping(logger log.Logger, bound time.Duration) {
	sdNotify(logger, daemon.SdNotifyStopping+"\n"+extend(bound))
}
