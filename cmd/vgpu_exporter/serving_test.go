package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"golang.org/x/crypto/bcrypt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
	"github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
	"github.com/vgpu-exporter/vgpu_exporter/webconf"
)

// The serving line names the URLs a user can open: https where the web
// configuration sets up TLS, and none with systemd socket activation,
// which listens where systemd says, not on --web.listen-address.
func TestServingPlaces(t *testing.T) {
	for _, tc := range []struct {
		name         string
		addrs        []string
		systemd, tls bool
		address      string
		bases        []string
	}{
		{"plain", []string{":9949"}, false, false, ":9949", []string{"http://localhost:9949"}},
		{"TLS", []string{"127.0.0.1:9949"}, false, true, "127.0.0.1:9949", []string{"https://127.0.0.1:9949"}},
		{"two, TLS", []string{":1", "[::1]:2"}, false, true, ":1,[::1]:2", []string{"https://localhost:1", "https://[::1]:2"}},
		{"vsock keeps its scheme", []string{"vsock://:3"}, false, true, "vsock://:3", []string{"vsock://:3"}},
		{"systemd socket", []string{":9949"}, true, false, "systemd socket activation (--web.systemd-socket)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			address, bases := servingPlaces(tc.addrs, tc.systemd, tc.tls)
			if address != tc.address || !slices.Equal(bases, tc.bases) {
				t.Errorf("servingPlaces(%q, %v, %v) = %q, %q; want %q, %q", tc.addrs, tc.systemd, tc.tls, address, bases, tc.address, tc.bases)
			}
		})
	}
}

// The HTTP server's error names where it listened: the listen address, or
// under --web.systemd-socket the socket activation, not the
// --web.listen-address it ignores (before, it named --web.listen-address=:9949
// there too).
func TestServeErrorNamesThePlace(t *testing.T) {
	// no socket handed over by systemd: socket activation fails at once
	t.Setenv("LISTEN_PID", "")
	t.Setenv("LISTEN_FDS", "")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name     string
		args     []string
		want     []string
		dontWant string
	}{
		{"systemd socket", []string{"--web.systemd-socket"}, []string{"HTTP server (systemd socket activation (--web.systemd-socket)): ", "no socket activation file descriptors found"}, "--web.listen-address"},
		{"address taken", []string{"--web.listen-address=" + taken.Addr().String()}, []string{"HTTP server (--web.listen-address=" + taken.Addr().String() + "): ", "address already in use"}, "systemd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, append(tc.args, "--sample.interval=1h")...)
			svc := newService(&fakeSource{}, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
			done := make(chan error, 1)
			go func() { done <- svc.serve(context.Background(), cfg, newFakeCollectorFor, make(chan os.Signal, 1)) }()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not return")
			}
			if err == nil || strings.Contains(err.Error(), tc.dontWant) {
				t.Fatalf("serve: %v, want no %q in it", err, tc.dontWant)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("serve: %v, want %q in it", err, w)
				}
			}
		})
	}
}

// With two --web.listen-address and a --web.config.file, each listener
// has a server of its own: the web configuration is applied once per
// request (its rate limit, 2 requests a listener, lets 2 through on each
// and refuses the third), both serve with basic auth, and the shutdown
// closes both (before, the one server's handler was wrapped, concurrently,
// once per listener: a data race, and each request passed the
// configuration twice, so the second listener's first request met 429).
func TestTwoListenersWebConfigOncePerRequest(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\nrate_limit:\n  burst: 2\n  interval: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := []string{freeAddr(t), freeAddr(t)}
	cfg := testConfig(t, "--web.listen-address="+addrs[0], "--web.listen-address="+addrs[1], "--web.config.file="+webCfg, "--sample.interval=1h")
	svc := newService(&fakeSource{}, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewNopLogger())
	if svc.web, err = webconf.Open(webCfg, maxWebConfigBytes, nil); err != nil { // as start does
		t.Fatal(err)
	}
	svc.webChecks = make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.serve(ctx, cfg, newFakeCollectorFor, make(chan os.Signal, 1)) }()
	for _, addr := range addrs {
		// Dialled, not asked: a request would use up the rate limit.
		waitUntil(t, "a listener on "+addr, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	for _, addr := range addrs {
		for i, want := range []int{200, 200} {
			if code, body := getBody(t, "http://"+addr+"/-/healthy", "prom", "s3cret"); code != want {
				t.Errorf("%s: request %d: %d %q, want %d: the web configuration's rate limit (2 a listener) met more than once per request", addr, i+1, code, body, want)
			}
		}
	}
	if code, _ := getBody(t, "http://"+addrs[0]+"/-/healthy", "prom", "s3cret"); code != 429 {
		t.Errorf("a third request on %s: %d, want 429 (the rate limit applied)", addrs[0], code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the shutdown", addr)
		}
	}
}

// The serving line comes once the listeners are bound: a port taken logs
// the error alone, not a serving line first (before, it was logged before
// the bind, and a start that failed there said it served).
func TestServingLoggedOnceBound(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	logs := &testutil.SyncBuffer{}
	cfg := testConfig(t, "--web.listen-address="+taken.Addr().String(), "--sample.interval=1h")
	svc := newService(&fakeSource{}, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewLogfmtLogger(logs))
	if err := svc.serve(context.Background(), cfg, newFakeCollectorFor, nil); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("serve on a port taken: %v", err)
	}
	if strings.Contains(logs.String(), "msg=serving") {
		t.Errorf("a serving line logged though the port could not be bound:\n%s", logs)
	}
}

// The shutdown's line gives the bound it keeps (stopBound, as told
// systemd): with the tuner, its restore's timeout and the waits after it
// (before, it said timeout=10s whatever the restore could take).
func TestShuttingDownLogsItsBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tuner bool
		want  string
	}{
		{"tuner", true, `msg="shutting down" timeout=40s`},
		{"no tuner", false, `msg="shutting down" timeout=10s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, svc, logs, _ := simTunerService(t, "--tuner.restore-timeout=30s")
			newC := newCollector
			if !tc.tuner {
				newC = newFakeCollectorFor
				logs = &testutil.SyncBuffer{}
				svc = newService(&fakeSource{}, &fakeBuilder{}, "", gpu.NewManualClock(time.Unix(1e9, 0)), time.Hour, log.NewLogfmtLogger(logs))
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- svc.serve(ctx, cfg, newC, make(chan os.Signal)) }()
			waitUntil(t, "the line saying what is served", func() bool { return strings.Contains(logs.String(), "msg=serving") })
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("serve did not return")
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("the shutdown's line is not %q:\n%s", tc.want, logs)
			}
		})
	}
}
