package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode"
)

func TestNewLoggerRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		format, level, want string
	}{
		{"xml", "info", "--log.format"},
		{"logfmt", "loud", "--log.level"},
	} {
		_, err := newLogger(&bytes.Buffer{}, tc.format, tc.level)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newLogger(%q, %q) = %v, want an error naming %s", tc.format, tc.level, err, tc.want)
		}
	}
}

func TestSlogThroughGoKit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		level   string
		log     func(l *slog.Logger)
		want    []string // substrings of the single line written
		wantOut bool
	}{
		{
			name:    "info with attrs",
			level:   "info",
			log:     func(l *slog.Logger) { l.Info("Listening on", "address", "[::]:9949") },
			want:    []string{"level=info", `msg="Listening on"`, "address=[::]:9949", "ts="},
			wantOut: true,
		},
		{
			name:    "debug dropped at info",
			level:   "info",
			log:     func(l *slog.Logger) { l.Debug("noise") },
			wantOut: false,
		},
		{
			name:    "debug kept at debug",
			level:   "debug",
			log:     func(l *slog.Logger) { l.Debug("detail", "n", 3) },
			want:    []string{"level=debug", "msg=detail", "n=3"},
			wantOut: true,
		},
		{
			name:    "warn dropped at error",
			level:   "error",
			log:     func(l *slog.Logger) { l.Warn("careful") },
			wantOut: false,
		},
		{
			name:    "error kept at warn",
			level:   "warn",
			log:     func(l *slog.Logger) { l.Error("broken", "err", "boom") },
			want:    []string{"level=error", "msg=broken", "err=boom"},
			wantOut: true,
		},
		{
			name:  "groups and WithAttrs",
			level: "info",
			log: func(l *slog.Logger) {
				l.With("component", "web").WithGroup("tls").Info("config", "file", "web.yml", slog.Group("peer", "ip", "10.0.0.1"))
			},
			want:    []string{"component=web", "tls.file=web.yml", "tls.peer.ip=10.0.0.1"},
			wantOut: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			kit, err := newLogger(&buf, "logfmt", tc.level)
			if err != nil {
				t.Fatal(err)
			}
			tc.log(newSlogLogger(kit, slogLevel(tc.level)))
			out := buf.String()
			if !tc.wantOut {
				if out != "" {
					t.Fatalf("expected nothing logged, got %q", out)
				}
				return
			}
			if strings.Count(out, "\n") != 1 {
				t.Fatalf("expected one line, got %q", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("line %q lacks %q", out, w)
				}
			}
		})
	}
}

// The go-kit level filter alone must also drop what slog would let through
// if the two levels disagreed: the filter is the last word.
func TestGoKitFilterAppliesToSlogRecords(t *testing.T) {
	var buf bytes.Buffer
	kit, err := newLogger(&buf, "logfmt", "error")
	if err != nil {
		t.Fatal(err)
	}
	newSlogLogger(kit, slog.LevelDebug).Info("dropped by go-kit")
	if buf.Len() != 0 {
		t.Fatalf("go-kit filter let through %q", buf.String())
	}
}

func TestSlogJSONFormat(t *testing.T) {
	var buf bytes.Buffer
	kit, err := newLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	newSlogLogger(kit, slog.LevelInfo).Warn("TLS is disabled.", "http2", false)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", buf.String(), err)
	}
	if m["level"] != "warn" || m["msg"] != "TLS is disabled." || m["http2"] != false {
		t.Fatalf("unexpected record %v", m)
	}
}

// TestSlogOneTimestamp: a line logged through slog carries go-kit's "ts"
// only, not the record's own time as well.
func TestSlogOneTimestamp(t *testing.T) {
	var buf bytes.Buffer
	base, err := newLogger(&buf, "logfmt", "info")
	if err != nil {
		t.Fatal(err)
	}
	newSlogLogger(base, slog.LevelInfo).Info("Listening on", "address", "[::]:9949", "tls", false)
	line := buf.String()
	if strings.Count(line, "ts=") != 1 || strings.Contains(line, "time=") {
		t.Errorf("line %q: want one ts= and no time=", line)
	}
	if !strings.Contains(line, "tls=false") || !strings.Contains(line, "caller=") {
		t.Errorf("line %q: want tls=false and the caller", line)
	}
}

// Text a tenant shapes (a pod's or a cgroup's name, a process's comm, its
// /metrics body quoted in an error) never forges a log line nor reaches the
// terminal as an escape sequence: whatever it holds, one record is one line
// with no control character nor any other that is not printable (line
// breaks, ESC, C1 controls such as CSI U+009B and NEL U+0085, the line and
// paragraph separators, bidi overrides are escaped), in either format, as a
// value or inside an error. Before, C1 controls and U+2028/2029 went
// through raw.
func TestLogLinesHostileText(t *testing.T) {
	hostile := []string{
		"a\nts=2026-01-01T00:00:00Z level=error msg=\"forged\"",
		"a\r\nlevel=error",
		"\x1b[2J\x1b[31mred\x1b[0m",
		"\x07\x08\x00",
		`" msg="forged`,
		"\xff\xfe invalid UTF-8",
		"\u009b2J\u009b31mred",
		"a\u0085level=error msg=forged",
		"a\u2028level=error\u2029msg=forged",
		"\u202egnp.exe",
		"\xff\u009b invalid and C1",
	}
	for _, format := range logFormats {
		for _, h := range hostile {
			var b bytes.Buffer
			l, err := newLogger(&b, format, "info")
			if err != nil {
				t.Fatal(err)
			}
			l.Log("level", "warn", "msg", "scrape of "+h, "tenant", h, "err", errors.New("GET http://x/metrics: "+h))
			s := b.String()
			if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") || strings.IndexFunc(strings.TrimSuffix(s, "\n"), func(r rune) bool { return r != ' ' && !unicode.IsGraphic(r) }) >= 0 {
				t.Errorf("%s, %q: not one line free of control characters: %q", format, h, s)
			}
		}
	}
}

// A value with no unprintable character reaches the line as it would
// without the escaping: printable text beyond ASCII, an ASCII control left
// to the format's own escape.
func TestLogLinesPrintableTextAsIs(t *testing.T) {
	for _, tc := range []struct{ format, in, want string }{
		{"logfmt", "llm-é ü", `tenant="llm-é ü"`},
		{"logfmt", "a\nb", `tenant="a\nb"`},
		{"logfmt", "a\u0085b", `tenant=a\u0085b`},
		{"json", "llm-é ü", `"tenant":"llm-é ü"`},
		{"json", "a\nb", `"tenant":"a\nb"`},
		{"json", "a\u0085b", `"tenant":"a\\u0085b"`},
	} {
		var b bytes.Buffer
		l, err := newLogger(&b, tc.format, "info")
		if err != nil {
			t.Fatal(err)
		}
		l.Log("level", "warn", "tenant", tc.in)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s, %q: line %q lacks %s", tc.format, tc.in, b.String(), tc.want)
		}
	}
}
