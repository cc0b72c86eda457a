package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	sloggokit "github.com/tjhop/slog-gokit"
)

// Log formats and levels accepted by --log.format and --log.level.
var (
	logFormats = []string{"logfmt", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// newLogger returns a go-kit logger writing to w in the given format, with a
// UTC timestamp on every line and lines below lvl dropped. Text that is not
// printable is escaped (escapeUnprintable, and the formats' own escapes).
func newLogger(w io.Writer, format, lvl string) (log.Logger, error) {
	var l log.Logger
	switch format {
	case "logfmt":
		l = escapeUnprintable(log.NewLogfmtLogger(log.NewSyncWriter(w)))
	case "json":
		l = escapeUnprintable(log.NewJSONLogger(log.NewSyncWriter(w)))
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

// newSlogLogger returns a *slog.Logger writing through logger, so libraries
// that want one (exporter-toolkit) log in the same format, to the same place
// and under the same go-kit level filter as the rest of the exporter; records
// below minLevel are dropped before they reach logger. Besides the go-kit
// logger's own keys (its "ts" timestamp among them), each line carries the
// record's caller.
func newSlogLogger(logger log.Logger, minLevel slog.Leveler) *slog.Logger {
	return slog.New(sloggokit.NewGoKitHandler(unwrapSlogValues(logger), minLevel))
}

// unwrapSlogValues adapts what the bridge passes to the go-kit logger. It
// drops the record's own time (the go-kit logger stamps every line with
// "ts" already, and two timestamps per line would only disagree), and it
// replaces the slog.Value values that the bridge passes for non-string
// attributes with the Go values they hold: go-kit's JSON logger would
// otherwise write them through their String method, so a boolean or a
// number would come out as a JSON string.
func unwrapSlogValues(next log.Logger) log.Logger {
	return log.LoggerFunc(func(keyvals ...any) error {
		out := keyvals[:0]
		for i := 0; i+1 < len(keyvals); i += 2 {
			k, v := keyvals[i], keyvals[i+1]
			if k == slog.TimeKey {
				continue
			}
			if sv, ok := v.(slog.Value); ok {
				v = sv.Any()
			}
			out = append(out, k, v)
		}
		if len(keyvals)%2 == 1 {
			out = append(out, keyvals[len(keyvals)-1])
		}
		return next.Log(out...)
	})
}

// escapeUnprintable escapes, in Go's way (\u009b, \u2028), the characters
// beyond ASCII that are not printable in the keys and values (strings,
// errors, fmt.Stringers) it passes to next: C1 controls (CSI U+009B, NEL
// U+0085), the line and paragraph separators, format characters (bidi
// overrides). Both formats escape ASCII's controls and invalid UTF-8
// themselves, but write those raw, and a terminal or a log viewer takes
// them for an escape sequence or a line break. A value with none is
// passed as it is.
func escapeUnprintable(next log.Logger) log.Logger {
	return log.LoggerFunc(func(keyvals ...any) error {
		var out []any // a copy, made at the first change: keyvals is the caller's
		for i, v := range keyvals {
			var s string
			switch v := v.(type) {
			case string:
				s = v
			case error:
				s = v.Error()
			case fmt.Stringer:
				s = v.String()
			default:
				continue
			}
			if !strings.ContainsFunc(s, unprintable) {
				continue
			}
			if out == nil {
				out = slices.Clone(keyvals)
			}
			var b strings.Builder
			for len(s) > 0 {
				r, n := utf8.DecodeRuneInString(s)
				if unprintable(r) {
					q := strconv.QuoteRuneToASCII(r)
					b.WriteString(q[1 : len(q)-1])
				} else {
					b.WriteString(s[:n]) // an invalid byte as it was: the format's to escape
				}
				s = s[n:]
			}
			out[i] = b.String()
		}
		if out == nil {
			return next.Log(keyvals...)
		}
		return next.Log(out...)
	})
}

// unprintable says whether r is a character beyond ASCII that is not
// printable (escapeUnprintable's).
func unprintable(r rune) bool {
	return r >= utf8.RuneSelf && !unicode.IsGraphic(r) // (U+FFFD, an invalid byte's rune, is graphic)
}
