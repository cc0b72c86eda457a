package mps

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

// A server list longer than any daemon keeps (here 2,000 PIDs, 14 KB) is
// an unexpected reply, refused before one get_client_list is sent: each
// listed server costs a run of the control program, and a 1 MiB reply
// (some 150,000 PIDs) held the controller's lock for hours.
func TestHugeServerListRefused(t *testing.T) {
	r := newRig(t, `read -r cmd a b c < "$STDIN"
case "$cmd" in
get_server_list) seq 1000 2999 ;;
get_client_list) ;;
esac`, "", func(o *Options) { o.Timeout = 20 * time.Second })
	start := time.Now()
	err := r.c.SetMPSActiveThreads(context.Background(), uuid, 100, 0.5)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "get_server_list") || !strings.Contains(err.Error(), "servers") {
		t.Errorf("error %v, want get_server_list's reply refused for its length", err)
	}
	if n := len(r.commands(t)); n != 1 {
		t.Errorf("%d daemon commands sent in %v, want only get_server_list", n, took)
	}
}

// A server listed twice is asked for its clients once.
func TestDuplicateServersAskedOnce(t *testing.T) {
	r := newRig(t, `read -r cmd a b c < "$STDIN"
case "$cmd" in
get_server_list) printf '100\n100\n100\n200\n' ;;
get_client_list) case "$a" in 200) echo 201 ;; esac ;;
get_active_thread_percentage) echo 100.0 ;;
esac`, "", nil)
	if err := r.c.SetMPSActiveThreads(context.Background(), uuid, 201, 0.5); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(r.commands(t), "|")
	if want := "get_server_list|get_client_list 100|get_client_list 200|get_active_thread_percentage 200"; got != want {
		t.Errorf("commands %s, want %s", got, want)
	}
}

// A restart hook that exits 0 has restarted the client, whatever it
// printed; its stdout and stderr are logged, shortened and escaped
// (before, neither was: "Error: ..." on stderr with exit 0 left no trace).
func TestRestartHookOutputLogged(t *testing.T) {
	var buf bytes.Buffer
	r := newRig(t, daemon, `echo "switched to standby"; echo "Error: old client did not drain" >&2; head -c 100000 /dev/zero >&2; echo pid=555`,
		func(o *Options) { o.Logger = log.NewLogfmtLogger(&buf) })
	if err := r.c.SetMPSActiveThreads(context.Background(), uuid, 201, 0.3); err != nil {
		t.Fatal(err)
	}
	if err := r.c.RestartClient(context.Background(), uuid, 201, "tenant-201"); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	if !strings.Contains(got, `output="switched to standby; pid=555"`) || !strings.Contains(got, `stderr="Error: old client did not drain; \\x00`) || len(got) > 2000 {
		t.Errorf("log of %d bytes lacks the hook's stdout and stderr: %.600s", len(got), got)
	}
}

// A set command the control program answers on stderr while exiting 0 is
// taken as done (harmless warnings are printed there too), but what it
// printed is logged at warning, shortened, at most once a minute with the
// count of those not logged (before, stderr was thrown away: a refused
// pinned memory limit, never read back, left no trace).
func TestSetStderrLogged(t *testing.T) {
	var buf bytes.Buffer
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	r := newRig(t, `read -r cmd a b c < "$STDIN"
case "$cmd" in
get_server_list) echo 100 ;;
get_client_list) echo 101 ;;
get_default_active_thread_percentage|get_active_thread_percentage) echo "ERROR: LD_PRELOAD cannot be preloaded" >&2; echo 100.0 ;;
set_device_pinned_mem_limit) echo "Failed to set the pinned memory limit: $c exceeds the device memory" >&2 ;;
esac`, "", func(o *Options) { o.Logger = log.NewLogfmtLogger(&buf); o.Clock = clock })
	ctx := context.Background()
	set := func() {
		t.Helper()
		if err := r.c.SetMPSPinnedMemoryLimit(ctx, uuid, 100, 1<<40); err != nil {
			t.Fatalf("error %v: a set that exited 0 is taken as done", err)
		}
	}
	set()
	if _, err := r.c.defaultPercentage(ctx); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	if !strings.Contains(got, "level=warn") || !strings.Contains(got, `command="set_device_pinned_mem_limit 100 3 1048576M"`) ||
		!strings.Contains(got, `stderr="Failed to set the pinned memory limit: 1048576M exceeds the device memory"`) || strings.Contains(got, "LD_PRELOAD") {
		t.Fatalf("log lacks the set's stderr, or has a read's: %s", got)
	}
	buf.Reset()
	set()
	set()
	if buf.Len() != 0 {
		t.Errorf("logged again within the minute: %s", buf.String())
	}
	clock.Advance(time.Minute)
	set()
	if got := buf.String(); strings.Count(got, "level=warn") != 1 || !strings.Contains(got, "not_logged=2") {
		t.Errorf("after a minute, log %q, want one line counting the two not logged", got)
	}
}

// A harmless warning printed on every set command is logged once a minute
// without holding back a different text in that minute: a refusal after
// it is logged too (before, one allowance for all texts left the refusal
// only counted in the next line's not_logged).
func TestSetStderrLoggedPerText(t *testing.T) {
	var buf bytes.Buffer
	clock := gpu.NewManualClock(time.Unix(1000, 0))
	r := newRig(t, `read -r cmd a b c < "$STDIN"
case "$cmd" in
get_server_list) echo 100 ;;
get_client_list) echo 101 ;;
set_device_pinned_mem_limit)
	echo "WARNING: libfoo.so cannot be preloaded" >&2
	[ "$c" = 1024M ] || echo "Failed to set the pinned memory limit: $c exceeds the device memory" >&2 ;;
esac`, "", func(o *Options) { o.Logger = log.NewLogfmtLogger(&buf); o.Clock = clock })
	ctx := context.Background()
	set := func(limit uint64) {
		t.Helper()
		if err := r.c.SetMPSPinnedMemoryLimit(ctx, uuid, 100, limit); err != nil {
			t.Fatalf("error %v: a set that exited 0 is taken as done", err)
		}
	}
	set(1 << 30)
	set(1 << 30)
	clock.Advance(10 * time.Second)
	set(1 << 40)
	got := buf.String()
	if strings.Count(got, "level=warn") != 2 || !strings.Contains(got, `stderr="WARNING: libfoo.so cannot be preloaded"`) ||
		!strings.Contains(got, `1048576M exceeds the device memory"`) {
		t.Fatalf("log %q, want the warning and, in the same minute, the refusal", got)
	}
	buf.Reset()
	clock.Advance(time.Minute)
	set(1 << 30)
	if got := buf.String(); strings.Count(got, "level=warn") != 1 || !strings.Contains(got, "not_logged=1") {
		t.Errorf("a minute on, log %q, want the warning counting the one not logged", got)
	}
}
