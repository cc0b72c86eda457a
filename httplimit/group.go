package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/go-kit/log"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
)

// Group serves a handler on each listener of exporter-toolkit's flags
// (--web.listen-address, --web.systemd-socket) with a server of its own,
// built as NewServer builds one. exporter-toolkit's web.Serve sets the
// server's handler to the web configuration's (basic auth, headers, its
// rate limit) around the one it finds there, and its TLS configuration:
// one server shared by listeners served at once (web.ListenAndServe) is
// raced for, and each request passes the configuration once per
// listener. The servers share one connection limit and one error log, so
// that --web.max-connections bounds the process's connections, and the
// error lines their rate, whatever the listener.
type Group struct {
	h      http.Handler
	lim    Limits
	errLog *serverErrorLog
	conns  *connLimiter // nil: no limit
	// Prepare, when set, is called with each server before it serves
	// (a hook on its BaseContext, called as its Serve begins).
	Prepare func(*http.Server)

	mu      sync.Mutex
	servers []*http.Server
	closed  bool
}

// NewGroup returns the group of servers of h, each behind the limits lim,
// logging through logger (NewServer).
func NewGroup(h http.Handler, lim Limits, logger log.Logger) *Group {
	g := &Group{h: h, lim: lim, errLog: newServerErrorLog(logger)}
	if lim.MaxConnections > 0 {
		g.conns = newConnLimiter(lim.MaxConnections, logger)
	}
	return g
}

// ListenAndServe is web.ListenAndServe with a server per listener: it
// opens the listeners of flags (systemd's with --web.systemd-socket, else
// one per --web.listen-address, vsock://:PORT among them) and serves them
// (Serve). A listener that cannot be opened is the error, nothing served.
func (g *Group) ListenAndServe(flags *web.FlagConfig, logger *slog.Logger) error {
	if flags == nil || flags.WebConfigFile == nil {
		return web.ErrMissingFlag
	}
	listeners, err := listen(flags, logger)
	if err != nil {
		return err
	}
	return g.Serve(listeners, flags, logger)
}

// Serve serves each of listeners with a server of its own (web.Serve,
// which applies the web configuration of flags) until every one has
// returned, and returns the first error: http.ErrServerClosed after
// Shutdown, which closes the listeners not served yet. The web
// configuration is read and checked once first, as web.Serve checks it:
// one that fails (unreadable, invalid) is the error, every listener
// closed, nothing served or logged here, where each listener's read would
// log the same error once per listener. A listener whose server stops
// with another error (its socket failing, the configuration read by its
// own web.Serve failing after all) is closed, and, while others may still
// serve, the error is logged at once naming its address.
func (g *Group) Serve(listeners []net.Listener, flags *web.FlagConfig, logger *slog.Logger) error {
	closeAll := func() {
		for _, l := range listeners {
			l.Close()
		}
	}
	if err := web.Validate(*flags.WebConfigFile); err != nil {
		closeAll()
		return err
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		closeAll()
		return http.ErrServerClosed
	}
	servers := make([]*http.Server, len(listeners))
	for i := range servers {
		servers[i] = newServer(g.h, g.lim, g.errLog, g.conns)
		if g.Prepare != nil {
			g.Prepare(servers[i])
		}
	}
	g.servers = servers
	g.mu.Unlock()

	errs := make([]error, len(listeners))
	var wg sync.WaitGroup
	for i, l := range listeners {
		wg.Go(func() {
			errs[i] = web.Serve(l, servers[i], flags, logger)
			// web.Serve leaves l open when it fails before serving;
			// closing a listener its server closed does nothing.
			_ = l.Close()
			if err := errs[i]; len(listeners) > 1 && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("listener stopped serving", "address", l.Addr().String(), "err", err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Shutdown shuts every server down gracefully (http.Server.Shutdown),
// all at once, within ctx; a server not serving yet never will.
func (g *Group) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	servers := g.servers
	g.mu.Unlock()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() { errs[i] = srv.Shutdown(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// listen opens the listeners of flags as web.ListenAndServe does; on an
// error it closes those it opened.
func listen(flags *web.FlagConfig, logger *slog.Logger) ([]net.Listener, error) {
	if flags.WebSystemdSocket != nil && *flags.WebSystemdSocket {
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		listeners, err := activation.Listeners()
		if err != nil {
			return nil, err
		}
		return activated(listeners)
	}
	if flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0 {
		return nil, web.ErrNoListeners
	}
	var listeners []net.Listener
	for _, address := range *flags.WebListenAddresses {
		l, err := listenOn(address)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, err
		}
		listeners = append(listeners, l)
	}
	return listeners, nil
}

// activated checks the listeners systemd handed over (activation.Listeners,
// in the order of their file descriptors from 3): one that is not a
// listening stream socket (a datagram socket, a FIFO, a connection of
// Accept=yes) is nil there, and refused, naming its descriptor, the
// others closed.
func activated(listeners []net.Listener) ([]net.Listener, error) {
	if len(listeners) < 1 {
		return nil, errors.New("no socket activation file descriptors found")
	}
	for i, l := range listeners {
		if l != nil {
			continue
		}
		for _, l := range listeners {
			if l != nil {
				l.Close()
			}
		}
		return nil, fmt.Errorf("socket activation: fd %d is not a listening stream socket (ListenStream= with Accept=no)", 3+i)
	}
	return listeners, nil
}

// listenOn opens address: vsock://:PORT or a TCP address.
func listenOn(address string) (net.Listener, error) {
	if !strings.HasPrefix(address, "vsock://") {
		return net.Listen("tcp", address)
	}
	// Parsed as exporter-toolkit parses it (a URL: vsock://:PORT/ too).
	u, err := url.Parse(address)
	if err != nil {
		return nil, fmt.Errorf("parsing vsock address %q: %w", address, err)
	}
	_, portStr, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing vsock address %q: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing vsock address %q: %w", address, err)
	}
	return vsock.Listen(uint32(port), nil)
}
