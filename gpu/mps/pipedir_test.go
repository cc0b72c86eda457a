package mps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pipe directory another user may have made or may write to (the
// default /tmp/nvidia-mps made first by a tenant, with its own daemon) is
// refused, at detection and before each command, with an error naming
// the directory, its owner and mode and what to do; the daemon's own
// layout (a directory root's or the exporter's, writable by its owner
// alone or sticky) is not. Before, any directory was used.
func TestPipeDirectoryChecked(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string) // dir exists, the test's, mode 0755
		want string                         // "" for accepted
	}{
		{"owner's, 0755", func(*testing.T, string) {}, ""},
		{"owner's, 0700", func(t *testing.T, d string) { chmod(t, d, 0o700) }, ""},
		{"group writable", func(t *testing.T, d string) { chmod(t, d, 0o775) }, "mode drwxrwxr-x"},
		{"writable by all", func(t *testing.T, d string) { chmod(t, d, 0o777) }, "mode drwxrwxrwx"},
		// as /tmp: others may not rename or remove the owner's pipes
		{"owner's, sticky, writable by all", func(t *testing.T, d string) { chmod(t, d, 0o777|os.ModeSticky) }, ""},
		{"another user's", func(t *testing.T, d string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give the directory away")
			}
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
		{"symbolic link", func(t *testing.T, d string) {
			real := d + ".real"
			if err := os.Rename(d, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, d); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"a file", func(t *testing.T, d string) {
			if err := os.Remove(d); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(d, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, daemon, "", nil)
			tc.make(t, r.pipe)
			_, detectErr := Detect(ctx, r.c.opts)
			_, sendErr := r.c.send(ctx, "get_default_active_thread_percentage")
			for _, err := range []error{detectErr, sendErr} {
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("error %v: the daemon's own layout refused", err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), r.pipe)):
					t.Errorf("error %v, want one naming %s and containing %q", err, r.pipe, tc.want)
				}
			}
			if tc.want != "" && len(r.commands(t)) != 0 {
				t.Errorf("commands %q sent to the daemon of a refused directory", r.commands(t))
			}
		})
	}
}

// A directory owned by neither root nor the exporter's user is refused.
func TestPipeDirectoryOwner(t *testing.T) {
	d := filepath.Join(t.TempDir(), "pipe")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	uid := os.Getuid()
	if uid == 0 {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		uid = 65534
	}
	for _, tc := range []struct {
		name string
		euid int
		ok   bool
	}{
		{"the exporter's", uid, true},
		{"another's", uid + 1, false},
	} {
		err := checkPipeDirectory(d, tc.euid)
		if (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want accepted %v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "owned by uid") {
			t.Errorf("%s: error %v does not name the owner", tc.name, err)
		}
	}
}

func chmod(t *testing.T, d string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(d, m); err != nil {
		t.Fatal(err)
	}
}
