package pipeline

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

// loggingReloads is a builder whose reloads of the tenants file return
// err and, unless made quietly, log their success as tenant.Builder does.
type loggingReloads struct {
	snapshots
	logger log.Logger
	err    error
	quiet  int // reloads made quietly
}

func (b *loggingReloads) Reload(path string) error {
	if b.err == nil {
		level.Info(b.logger).Log("msg", "tenants file reloaded", "file", path)
	}
	return b.err
}

func (b *loggingReloads) ReloadQuietly(string) error { b.quiet++; return b.err }

// lines is a writer handing each line logged (a go-kit logger writes a
// line at once) over on a channel.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- strings.TrimSuffix(string(p), "\n")
	return len(p), nil
}

// drain returns the lines logged so far.
func (l lines) drain() []string {
	var got []string
	for {
		select {
		case line := <-l:
			got = append(got, line)
		default:
			return got
		}
	}
}

// linesHold reports whether got are, in order, lines holding want, and
// those of want naming no not_logged none.
func linesHold(got, want []string) bool {
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = strings.Contains(got[i], want[i]) && (strings.Contains(want[i], "not_logged") || !strings.Contains(got[i], "not_logged"))
	}
	return ok
}

// A client asking for reload after reload (POST /-/reload, which needs no
// authentication without a web configuration) writes the lines of one
// reload, the files' successes and the outcome, at once, then those of at
// most one per AskedLogEvery; a reload whose outcome differs from the
// previous one is logged all the same, counting the reloads not logged,
// and a SIGHUP's always is (before, each request wrote its lines: 1000
// requests, 3000 lines). The reloads held back are summed up once the
// bound allows a line, by a timer on the pipeline's clock: the last one's
// outcome and when it was asked for, and their count; before, a burst's
// last reloads, one that put an edited file in use among them, were never
// logged unless a later reload was.
func TestAskedReloadsLoggedBounded(t *testing.T) {
	logs := make(lines, 64)
	logger := log.NewLogfmtLogger(logs)
	t0 := time.Unix(1e9, 0).UTC()
	clock := gpu.NewManualClock(t0)
	b := &loggingReloads{logger: logger}
	p := New(&failingSource{}, b, "/etc/tenants.yaml", clock, time.Hour, logger)
	web := &reloader{}
	p.AlsoReload("web configuration", web, logger)
	const reloaded, failed = `msg="reloaded the configuration" source=http`, `msg="reload failed, the files named keep their previous configuration unless their error says otherwise" source=http`
	const heldBack = ` (the last of the reloads asked for whose lines were held back)" source=http`
	summary := func(msg string, askedAt time.Duration, kv string) string {
		return `msg="` + msg + heldBack + kv + ` asked_at=` + t0.Add(askedAt).Format(time.RFC3339Nano)
	}
	fileLines := []string{`msg="web configuration reloaded"`, `msg="tenants file reloaded"`}
	for _, step := range []struct {
		name    string
		advance time.Duration
		summary string // the line the timer logs once the clock advanced; "": none
		err     error  // the tenants file's
		asks    int
		want    []string // the lines the asks write, in order; none: nothing
		armed   int      // timers waiting after the asks; -1: not checked
	}{
		{name: "a flood", asks: 1000, want: append(fileLines, reloaded), armed: 1},
		{name: "within the interval", advance: AskedLogEvery - time.Nanosecond, armed: 1},
		{name: "an interval on", advance: time.Nanosecond, summary: summary("reloaded the configuration", 0, "") + " not_logged=999"},
		{name: "an edited file, held back", advance: time.Second, asks: 1, armed: 1},
		{name: "its interval on", advance: AskedLogEvery - time.Second, summary: summary("reloaded the configuration", 11*time.Second, "") + " not_logged=1"},
		{name: "a failure at once", err: errors.New("/etc/tenants.yaml:1: bad"), asks: 1, want: []string{failed + ` err="/etc/tenants.yaml:1: bad"`}},
		{name: "the same failure", err: errors.New("/etc/tenants.yaml:1: bad"), asks: 5, armed: 1},
		{name: "another failure", err: errors.New("/etc/tenants.yaml:2: worse"), asks: 1, want: []string{failed + ` err="/etc/tenants.yaml:2: worse" not_logged=5`}, armed: 1},
		// The timer set for the same failure fires with nothing held:
		// before or after these asks, it logs nothing.
		{name: "a success an interval on", advance: AskedLogEvery, asks: 3, want: append(fileLines, reloaded), armed: -1},
		{name: "the next interval", advance: AskedLogEvery, summary: summary("reloaded the configuration", 30*time.Second, "") + " not_logged=2"},
		{name: "a failure held back", advance: time.Second, err: errors.New("/etc/tenants.yaml:1: bad"), asks: 1, want: []string{failed + ` err="/etc/tenants.yaml:1: bad"`}},
		{name: "and again", err: errors.New("/etc/tenants.yaml:1: bad"), asks: 1, armed: 1},
		{name: "its summary", advance: AskedLogEvery, summary: summary("reload failed, the files named keep their previous configuration unless their error says otherwise", 41*time.Second, ` err="/etc/tenants.yaml:1: bad"`) + " not_logged=1"},
	} {
		clock.Advance(step.advance)
		if step.summary != "" {
			if got := <-logs; !linesHold([]string{got}, []string{step.summary}) {
				t.Errorf("%s: the summary logged:\n%s\nwant a line holding:\n%s", step.name, got, step.summary)
			}
		}
		b.err = step.err
		for range step.asks {
			if err := p.ReloadAsked("http"); !errors.Is(err, step.err) {
				t.Fatalf("%s: reload: %v, want %v", step.name, err, step.err)
			}
		}
		if got := logs.drain(); !linesHold(got, step.want) {
			t.Errorf("%s: %d reloads asked for logged:\n%s\nwant lines holding:\n%s", step.name, step.asks, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
		// A summary awaited with no timer set would never come.
		if n := clock.Waiters(); step.armed >= 0 && n != step.armed {
			t.Fatalf("%s: %d timers waiting on the clock, want %d (a summary of the reloads held back)", step.name, n, step.armed)
		}
	}
	if web.n != 1013 || b.quiet != 1011 {
		t.Errorf("%d reloads of the web configuration and %d quiet ones of the tenants file, want 1013 and 1011 (all but the 2 allowed a line): each asked for is made", web.n, b.quiet)
	}

	logged := &testutil.SyncBuffer{}
	p.logger = log.NewLogfmtLogger(logged)
	b.logger = p.logger
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.ReloadOnSignal(ctx, hup) }()
	hup <- syscall.SIGHUP
	hup <- syscall.SIGHUP // taken once the first reload is done
	cancel()
	<-done
	if got := logged.String(); strings.Count(got, `msg="reloaded the configuration" source=SIGHUP`) != 2 || strings.Count(got, `msg="tenants file reloaded"`) != 2 {
		t.Errorf("2 SIGHUPs within the interval of a reload asked for logged:\n%s\nwant each reload's lines", got)
	}
}

// Reloads held back when the pipeline stops are summed up at once, and
// the pipeline's wait returns once that is logged, its timer's goroutine
// ended; a reload held back after the stop is logged at once (before,
// they were never logged).
func TestHeldBackReloadsSummedUpAtStop(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	logger := log.NewLogfmtLogger(logs)
	clock := gpu.NewManualClock(time.Unix(1e9, 0).UTC())
	p := New(&failingSource{}, &loggingReloads{logger: logger}, "/etc/tenants.yaml", clock, time.Hour, logger)
	ctx, cancel := context.WithCancel(context.Background())
	wait := p.Start(ctx)
	for range 5 {
		if err := p.ReloadAsked("http"); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wait()
	const summary = `msg="reloaded the configuration (the last of the reloads asked for whose lines were held back)" source=http asked_at=2001-09-09T01:46:40Z not_logged=4`
	if got := logs.String(); strings.Count(got, "reloaded the configuration") != 2 || !strings.Contains(got, summary) {
		t.Errorf("5 reloads asked for, then the stop, logged:\n%s\nwant the first's lines and a line holding:\n%s", got, summary)
	}
	before := len(logs.String())
	for range 2 {
		if err := p.ReloadAsked("http"); err != nil {
			t.Fatal(err)
		}
	}
	if got := logs.String()[before:]; strings.Count(got, "not_logged=1") != 2 {
		t.Errorf("2 reloads held back after the stop logged:\n%s\nwant each at once", got)
	}
}
