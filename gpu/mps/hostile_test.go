package mps

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
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
