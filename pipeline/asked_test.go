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

// A client asking for reload after reload (POST /-/reload, which needs no
// authentication without a web configuration) writes the lines of one
// reload, the files' successes and the outcome, at once, then those of at
// most one per AskedLogEvery, counting the reloads not logged; a reload
// whose outcome differs from the previous one is logged all the same, and
// a SIGHUP's always is (before, each request wrote its lines: 1000
// requests, 3000 lines).
func TestAskedReloadsLoggedBounded(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	logger := log.NewLogfmtLogger(logs)
	clock := gpu.NewManualClock(time.Unix(1e9, 0))
	b := &loggingReloads{logger: logger}
	p := New(&failingSource{}, b, "/etc/tenants.yaml", clock, time.Hour, logger)
	web := &reloader{}
	p.AlsoReload("web configuration", web, logger)
	const reloaded, failed = `msg="reloaded the configuration" source=http`, `msg="reload failed, the files named keep their previous configuration unless their error says otherwise" source=http`
	fileLines := []string{`msg="web configuration reloaded"`, `msg="tenants file reloaded"`}
	for _, step := range []struct {
		name    string
		advance time.Duration
		err     error // the tenants file's
		asks    int
		want    []string // the lines written, in order; none: nothing
	}{
		{name: "a flood", asks: 1000, want: append(fileLines, reloaded)},
		{name: "an interval on", advance: AskedLogEvery, asks: 1, want: append(fileLines, reloaded+" not_logged=999")},
		{name: "a failure at once", err: errors.New("/etc/tenants.yaml:1: bad"), asks: 1, want: []string{failed + ` err="/etc/tenants.yaml:1: bad"`}},
		{name: "the same failure", err: errors.New("/etc/tenants.yaml:1: bad"), asks: 5},
		{name: "another failure", err: errors.New("/etc/tenants.yaml:2: worse"), asks: 1, want: []string{failed + ` err="/etc/tenants.yaml:2: worse" not_logged=5`}},
		{name: "a success after failures", asks: 3, want: []string{reloaded}},
		{name: "the next interval", advance: AskedLogEvery, asks: 1, want: append(fileLines, reloaded+" not_logged=2")},
	} {
		clock.Advance(step.advance)
		b.err = step.err
		before := len(logs.String())
		for range step.asks {
			if err := p.ReloadAsked("http"); !errors.Is(err, step.err) {
				t.Fatalf("%s: reload: %v, want %v", step.name, err, step.err)
			}
		}
		got := strings.Split(strings.TrimSuffix(logs.String()[before:], "\n"), "\n")
		if len(step.want) == 0 && got[0] == "" {
			continue
		}
		ok := len(got) == len(step.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], step.want[i]) && (strings.Contains(step.want[i], "not_logged") || !strings.Contains(got[i], "not_logged"))
		}
		if !ok {
			t.Errorf("%s: %d reloads asked for logged:\n%s\nwant lines holding:\n%s", step.name, step.asks, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
	}
	if web.n != 1012 || b.quiet != 1009 {
		t.Errorf("%d reloads of the web configuration and %d quiet ones of the tenants file, want 1012 and 1009 (all but the 3 allowed a line): each asked for is made", web.n, b.quiet)
	}

	before := len(logs.String())
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.ReloadOnSignal(ctx, hup) }()
	hup <- syscall.SIGHUP
	hup <- syscall.SIGHUP // taken once the first reload is done
	cancel()
	<-done
	if got := logs.String()[before:]; strings.Count(got, `msg="reloaded the configuration" source=SIGHUP`) != 2 || strings.Count(got, `msg="tenants file reloaded"`) != 2 {
		t.Errorf("2 SIGHUPs within the interval of a reload asked for logged:\n%s\nwant each reload's lines", got)
	}
}
