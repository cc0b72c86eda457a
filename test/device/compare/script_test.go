package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunScript runs ../run.sh against a fake exporter (python3's HTTP
// server serving a saved page) and a fake nvidia-smi (printing a saved
// report), so the script's plumbing is checked without a GPU.
func TestRunScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a shell script")
	}
	for _, tool := range []string{"bash", "curl", "python3", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	compare := filepath.Join(t.TempDir(), "compare")
	if out, err := exec.Command("go", "build", "-o", compare, ".").CombinedOutput(); err != nil {
		t.Fatalf("building compare: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		metrics string
		code    int
		want    string
	}{
		{"metrics-pass.prom", 0, "PASS"},
		{"metrics-fail.prom", 1, "FAIL"},
	} {
		t.Run(tc.metrics, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			www := filepath.Join(dir, "www")
			out := filepath.Join(dir, "out")
			for _, d := range []string{bin, www} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			abs := func(p string) string {
				a, err := filepath.Abs(p)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			page, err := os.ReadFile("testdata/" + tc.metrics)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(www, "metrics"), page, 0o644); err != nil {
				t.Fatal(err)
			}
			write := func(name, body string) {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write("nvidia-smi", fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = -L ]; then echo 'GPU 0: NVIDIA H200 (UUID: x)'; exit 0; fi\ncat %s\n",
				abs("testdata/nvidia-smi-2gpu.xml")))
			write("vgpu_exporter", fmt.Sprintf(`#!/bin/sh
port=""
for a in "$@"; do
	case "$a" in
	--backend=nvml) ;;
	--web.listen-address=:*) port="${a#--web.listen-address=:}" ;;
	*) echo "unexpected flag $a" >&2; exit 2 ;;
	esac
done
cd %s && exec python3 -m http.server --bind 127.0.0.1 "$port"
`, www))
			cmd := exec.Command("bash", abs("../run.sh"), filepath.Join(bin, "vgpu_exporter"), out)
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"NO_LOAD=1", "SETTLE=0", "COMPARE="+compare, "PORT="+freePort(t))
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stdout
			err = cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(stdout.String(), tc.want) {
				t.Fatalf("run.sh exit %d (want %d):\n%s", code, tc.code, stdout.String())
			}
			for _, f := range []string{"metrics.txt", "nvidia-smi.xml", "compare.txt", "exporter.log"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("run.sh did not save %s", f)
				}
			}
		})
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
