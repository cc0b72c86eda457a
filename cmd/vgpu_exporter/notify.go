package main

import (
	"context"
	"net"
	"net/http"
	"sync"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// Where systemd starts the exporter as a Type=notify service (it sets
// NOTIFY_SOCKET), the exporter tells it when it serves (READY=1: systemd's
// start, and a reload, wait for it; a start that fails before it fails
// `systemctl start`) and when it stops (STOPPING=1). Elsewhere (no
// NOTIFY_SOCKET: a container, a shell) nothing is sent.

// notifyReadyOnServe makes server tell systemd it is ready once it
// accepts on its first listener (http.Server calls BaseContext as each
// Serve begins, the listener open and the web configuration applied).
func notifyReadyOnServe(server *http.Server, logger log.Logger) {
	var once sync.Once
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

// notifyStopping tells systemd the service is stopping: it sets the
// tuner's settings back and closes the backend before it exits.
func notifyStopping(logger log.Logger) { sdNotify(logger, daemon.SdNotifyStopping) }
