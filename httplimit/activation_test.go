package httplimit

import (
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/exporter-toolkit/web"
)

// A file descriptor systemd hands over that is not a listening stream
// socket is nil among activation.Listeners': refused, naming it, the
// others closed.
func TestActivatedRefusesWhatIsNotAListener(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nils    []bool // per descriptor from 3: not a listener
		wantErr string // "" none
	}{
		{"none handed over", nil, "no socket activation file descriptors found"},
		{"one listener", []bool{false}, ""},
		{"datagram socket", []bool{true}, "socket activation: fd 3 is not a listening stream socket"},
		{"listener then datagram socket", []bool{false, true}, "socket activation: fd 4 is not a listening stream socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ls []net.Listener
			for _, isNil := range tc.nils {
				var l net.Listener
				if !isNil {
					var err error
					if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
						t.Fatal(err)
					}
					defer l.Close()
				}
				ls = append(ls, l)
			}
			got, err := activated(ls)
			if tc.wantErr == "" {
				if err != nil || len(got) != len(ls) {
					t.Fatalf("activated: %d listeners, %v; want the %d handed over", len(got), err, len(ls))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
				t.Fatalf("activated: %v, %v; want no listener and an error with %q", got, err, tc.wantErr)
			}
			for _, l := range ls {
				if l == nil {
					continue
				}
				if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
					c.Close()
					t.Errorf("listener %s left open", l.Addr())
				}
			}
		})
	}
}

// --web.systemd-socket with a datagram socket or a pipe as fd 3, as
// systemd hands them over to a child (this test, run again): the group
// refuses to serve, naming the descriptor; before, web.Serve took the nil
// listener and the process died of a nil pointer dereference.
func TestSystemdSocketNotAListenerRefused(t *testing.T) {
	if n := os.Getenv("HTTPLIMIT_ACTIVATION_CHILD"); n != "" {
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		os.Setenv("LISTEN_FDS", n)
		yes, cfg := true, ""
		g := NewGroup(http.NotFoundHandler(), Limits{}, log.NewNopLogger())
		err := g.ListenAndServe(&web.FlagConfig{WebSystemdSocket: &yes, WebConfigFile: &cfg}, slog.New(slog.DiscardHandler))
		os.Stdout.WriteString("ListenAndServe: " + err.Error() + "\n")
		os.Exit(0)
	}
	datagram := func(t *testing.T) *os.File {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f, err := c.(*net.UDPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	pipe := func(t *testing.T) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		return r
	}
	listener := func(t *testing.T) *os.File {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name  string
		files []func(*testing.T) *os.File
		want  string
	}{
		{"datagram socket", []func(*testing.T) *os.File{datagram}, "fd 3 is not a listening stream socket"},
		{"pipe", []func(*testing.T) *os.File{pipe}, "fd 3 is not a listening stream socket"},
		{"listener then datagram socket", []func(*testing.T) *os.File{listener, datagram}, "fd 4 is not a listening stream socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSystemdSocketNotAListenerRefused$")
			cmd.Env = append(os.Environ(), "HTTPLIMIT_ACTIVATION_CHILD="+strconv.Itoa(len(tc.files)))
			for _, open := range tc.files {
				f := open(t)
				defer f.Close()
				cmd.ExtraFiles = append(cmd.ExtraFiles, f)
			}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "ListenAndServe: socket activation: "+tc.want) {
				t.Errorf("child: %v\n%s\nwant ListenAndServe refused: %q", err, out, tc.want)
			}
		})
	}
}
