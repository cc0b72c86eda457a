package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/exporter-toolkit/web"
)

// records is a slog handler that hands each record over on a channel.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool        { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error { r <- rec; return nil }
func (r records) WithAttrs([]slog.Attr) slog.Handler              { return r }
func (r records) WithGroup(string) slog.Handler                   { return r }

// brokenListener fails its first Accept for good, as a socket that broke.
type brokenListener struct{ net.Listener }

func (l brokenListener) Accept() (net.Conn, error) { return nil, errors.New("accept: socket broke") }

// A listener whose server stops with an error while the other serves is
// logged at once, at error level, naming its address: before, nothing was
// said until the shutdown.
func TestGroupListenerStoppedLoggedAtOnce(t *testing.T) {
	var ls []net.Listener
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	broken := ls[0].Addr().String()
	ls[0] = brokenListener{ls[0]}
	logs := make(records, 16)
	cfg := ""
	g := NewGroup(http.NotFoundHandler(), Limits{ReadHeaderTimeout: time.Second}, log.NewNopLogger())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ls, &web.FlagConfig{WebConfigFile: &cfg}, slog.New(logs)) }()
	defer g.Shutdown(context.Background())
	guard := time.After(20 * time.Second) // against a hang, not a bound on anything
	for logged := false; !logged; {
		select {
		case rec := <-logs:
			if rec.Level != slog.LevelError {
				continue
			}
			var addr, errText string
			rec.Attrs(func(a slog.Attr) bool {
				switch a.Key {
				case "address":
					addr = a.Value.String()
				case "err":
					errText = a.Value.String()
				}
				return true
			})
			if addr != broken || !strings.Contains(errText, "socket broke") {
				t.Errorf("logged %q address=%q err=%q, want the address %s and its error", rec.Message, addr, errText, broken)
			}
			logged = true
		case err := <-done:
			t.Fatalf("Serve returned with a listener serving: %v", err)
		case <-guard:
			t.Fatal("the listener that stopped is not logged while the other serves")
		}
	}
	resp, err := http.Get("http://" + ls[1].Addr().String() + "/")
	if err != nil {
		t.Fatalf("the other listener: %v", err)
	}
	resp.Body.Close()
}

// A web configuration that cannot be read fails Serve before serving: the
// listeners are closed (before, they stayed open, accepting connections
// nobody served, until the process ended).
func TestGroupClosesListenersWhenServeFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "web.yml")
	for _, n := range []int{1, 2} {
		var ls []net.Listener
		for range n {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ls = append(ls, l)
		}
		g := NewGroup(http.NotFoundHandler(), Limits{ReadHeaderTimeout: time.Second}, log.NewNopLogger())
		if err := g.Serve(ls, &web.FlagConfig{WebConfigFile: &missing}, slog.New(slog.DiscardHandler)); err == nil {
			t.Fatalf("%d listeners: Serve with a missing web configuration succeeded", n)
		}
		for _, l := range ls {
			if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
				c.Close()
				t.Errorf("%d listeners: %s accepts connections after Serve failed", n, l.Addr())
			}
		}
	}
}

// vsock addresses are parsed as exporter-toolkit parses them (a URL),
// vsock://:PORT/ too: before, the trailing slash was refused here though
// the toolkit and its flag accept it.
func TestVsockAddressParsedAsTheToolkit(t *testing.T) {
	for _, tc := range []struct {
		address string
		valid   bool
	}{
		{"vsock://:9400", true},
		{"vsock://:9400/", true},
		{"vsock://:9400/metrics", true},
		{"vsock://9400", false},
		{"vsock://:port", false},
		{"vsock://:4294967296", false},
	} {
		l, err := listenOn(tc.address)
		if err == nil {
			l.Close()
		}
		// Without a vsock device a valid address fails to listen, not to parse.
		parseErr := err != nil && strings.Contains(err.Error(), "parsing vsock address")
		if parseErr == tc.valid {
			t.Errorf("%s: %v; want valid %v", tc.address, err, tc.valid)
		}
		if parseErr && !strings.Contains(err.Error(), tc.address) {
			t.Errorf("%s: %v, want the address named", tc.address, err)
		}
	}
}

// A web configuration that cannot be read is one error, returned, for
// every listener: nothing is logged per listener (before, each of them
// logged the same error at error level, and the error was returned too).
func TestGroupUnreadableWebConfigOneError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "web.yml")
	for _, n := range []int{1, 2, 3} {
		var ls []net.Listener
		for range n {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ls = append(ls, l)
		}
		logs := make(records, 16)
		g := NewGroup(http.NotFoundHandler(), Limits{ReadHeaderTimeout: time.Second}, log.NewNopLogger())
		err := g.Serve(ls, &web.FlagConfig{WebConfigFile: &missing}, slog.New(logs))
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("%d listeners: Serve returned %v, want the file's error", n, err)
		}
		close(logs)
		for rec := range logs {
			if rec.Level >= slog.LevelWarn {
				t.Errorf("%d listeners: logged %q at %v, want the error returned alone", n, rec.Message, rec.Level)
			}
		}
	}
}
