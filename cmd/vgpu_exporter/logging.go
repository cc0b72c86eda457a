package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// Log formats and levels accepted by --log.format and --log.level.
var (
	logFormats = []string{"logfmt", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// newLogger returns a go-kit logger writing to w in the given format, with a
// UTC timestamp on every line and lines below lvl dropped.
func newLogger(w io.Writer, format, lvl string) (log.Logger, error) {
	var l log.Logger
	switch format {
	case "logfmt":
		l = log.NewLogfmtLogger(log.NewSyncWriter(w))
	case "json":
		l = log.NewJSONLogger(log.NewSyncWriter(w))
	default:
		return nil, fmt.Errorf("--log.format: unknown format %q (one of %s)", format, strings.Join(logFormats, ", "))
	}
	v, err := level.Parse(lvl)
	if err != nil {
		return nil, fmt.Errorf("--log.level: unknown level %q (one of %s)", lvl, strings.Join(logLevels, ", "))
	}
	l = level.NewFilter(l, level.Allow(v))
	return log.With(l, "ts", log.DefaultTimestampUTC), nil
}

// slogLevel maps a --log.level value to the slog level that lets the same
// records through as the go-kit filter does.
func slogLevel(lvl string) slog.Level {
	switch lvl {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// kitHandler is a slog.Handler that writes every record through a go-kit
// logger, so libraries that want a *slog.Logger (exporter-toolkit) log in
// the same format, to the same place and under the same level filter as
// the rest of the exporter.
type kitHandler struct {
	logger log.Logger
	min    slog.Leveler
	// attrs are the key/value pairs added by WithAttrs, already prefixed
	// with the groups open at the time.
	attrs []any
	// group is the dotted prefix of the groups opened by WithGroup.
	group string
}

// newSlogLogger returns a *slog.Logger writing through logger; records
// below minLevel are dropped before they reach it.
func newSlogLogger(logger log.Logger, minLevel slog.Leveler) *slog.Logger {
	return slog.New(&kitHandler{logger: logger, min: minLevel})
}

// Enabled reports whether records at l are written.
func (h *kitHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.min.Level()
}

// Handle writes r as one go-kit log line: level, msg, then the attributes.
func (h *kitHandler) Handle(_ context.Context, r slog.Record) error {
	kv := make([]any, 0, 4+len(h.attrs)+2*r.NumAttrs())
	kv = append(kv, level.Key(), kitLevel(r.Level), "msg", r.Message)
	kv = append(kv, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		kv = appendAttr(kv, h.group, a)
		return true
	})
	return h.logger.Log(kv...)
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *kitHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any{}, h.attrs...)
	for _, a := range attrs {
		n.attrs = appendAttr(n.attrs, h.group, a)
	}
	return &n
}

// WithGroup returns a handler that prefixes later attribute keys with name.
func (h *kitHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.group = h.group + name + "."
	return &n
}

// appendAttr flattens a (possibly grouped) attribute into go-kit key/value
// pairs, joining group names with dots.
func appendAttr(kv []any, prefix string, a slog.Attr) []any {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return kv
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, g := range a.Value.Group() {
			kv = appendAttr(kv, p, g)
		}
		return kv
	}
	return append(kv, prefix+a.Key, a.Value.Any())
}

// kitLevel maps a slog level to the go-kit level value the filter knows.
func kitLevel(l slog.Level) level.Value {
	switch {
	case l >= slog.LevelError:
		return level.ErrorValue()
	case l >= slog.LevelWarn:
		return level.WarnValue()
	case l >= slog.LevelInfo:
		return level.InfoValue()
	default:
		return level.DebugValue()
	}
}
