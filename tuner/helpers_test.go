package tuner

import (
	"os"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/tuner/tunertest"
)

// The fakes and builders shared with the other tuner packages' tests.
var (
	t0       = tunertest.T0
	mpsProc  = tunertest.MPSProc
	snapshot = tunertest.Snapshot
)

type (
	fakeControl = tunertest.FakeControl
	migHost     = tunertest.MIGHost
)

// readFile is the contents of path; a read that fails fails the test (a
// comparison of two failed reads would pass).
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openJournal is the journal at path, opened as a start opens it; an open
// that fails fails the test.
func openJournal(t *testing.T, path string) *Journal {
	t.Helper()
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
