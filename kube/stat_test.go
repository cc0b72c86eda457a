package kube

import (
	"os"
	"strings"
	"testing"
)

func TestStatusUID(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int
	}{
		{"Name:\tvllm\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n", 1000},
		{"Uid:\t0\t0\t0\t0\n", 0},
		{"Uid:\t4294967294\t0\t0\t0\n", 4294967294},
		{"Uid:\t4294967295\t0\t0\t0\n", -1}, // (uid_t)-1 is no UID
		{"Uid:\t4294967296\t0\t0\t0\n", -1}, // past a uid_t
		{"Uid:\t-5\t0\t0\t0\n", -1},
		{"Uid:\t+5\t0\t0\t0\n", -1},
		{"Uid:\t0x10\n", -1},
		{"Uid:\n", -1},
		{"Name:\tx\n", -1},
		{"", -1},
		// the kernel escapes a newline in a name ("\n" as "\\n"): a name
		// never makes a line of its own
		{"Name:\tx\\nUid:\t0\nUid:\t1000\t1000\t1000\t1000\n", 1000},
	} {
		if got := StatusUID([]byte(tc.status)); got != tc.want {
			t.Errorf("StatusUID(%q) = %d, want %d", tc.status, got, tc.want)
		}
	}
	// this machine's own /proc
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		if u := StatusUID(b); u != os.Getuid() {
			t.Errorf("/proc/self/status: UID %d, want %d", u, os.Getuid())
		}
	}
}

func FuzzStatusUID(f *testing.F) {
	f.Add([]byte("Name:\tvllm\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n"))
	f.Add([]byte("Uid:\t-5\n"))
	f.Add([]byte("Uid:\t4294967295\t0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		u := StatusUID(b)
		if u < -1 || u >= 1<<32-1 {
			t.Fatalf("UID %d", u)
		}
		if u >= 0 && !strings.Contains(string(b), "Uid:") {
			t.Fatalf("UID %d of %q, no Uid line", u, b)
		}
	})
}

func TestComm(t *testing.T) {
	root := t.TempDir()
	for pid, tc := range []struct{ comm, want string }{
		{"vllm\n", "vllm"},
		{" vllm\n", " vllm"},
		{"vllm \n", "vllm "},
		{"a b\n", "a b"},
		{"(sd-pam)\n", "(sd-pam)"},
		{"a\nb\n", "a\nb"},
		{"tritonserver_lo\n", "tritonserver_lo"}, // cut to 15 bytes by the kernel
		{"\n", ""},
	} {
		WriteProc(t, root, pid+1, "", tc.comm, "")
		if got := NewProcReader(root).Comm(uint32(pid + 1)); got != tc.want {
			t.Errorf("comm %q: Comm = %q, want %q", tc.comm, got, tc.want)
		}
	}
	if got := NewProcReader(root).Comm(999); got != "" {
		t.Errorf("no process: Comm = %q", got)
	}
}
