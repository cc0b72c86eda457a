package procmetrics

import (
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs"

	vtestutil "github.com/vgpu-exporter/vgpu_exporter/internal/testutil"
)

func value(mf *dto.MetricFamily) float64 {
	m := mf.GetMetric()[0]
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// The collector serves what client_golang's process collector serves for
// the same process: the same families, help and types, and the same
// values (those that move between two readings bracketed by ours).
func TestProcessCollectorMatchesClientGolang(t *testing.T) {
	ours := New()
	if _, ok := ours.(*processCollector); !ok {
		t.Fatalf("New on Linux is %T", ours)
	}
	before := vtestutil.Gather(t, ours)
	theirs := vtestutil.Gather(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	after := vtestutil.Gather(t, ours)
	if len(theirs) == 0 {
		t.Fatal("client_golang's collector served nothing")
	}
	for name, want := range theirs {
		got, ok := before[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if got.GetHelp() != want.GetHelp() || got.GetType() != want.GetType() {
			t.Errorf("%s: help %q type %v, want %q %v", name, got.GetHelp(), got.GetType(), want.GetHelp(), want.GetType())
		}
		b, w, a := value(got), value(want), value(after[name])
		switch name {
		case "process_cpu_seconds_total", "process_network_receive_bytes_total", "process_network_transmit_bytes_total":
			// Ours before theirs; the network counters after may be the
			// cached reading of before.
			if b > w || (name == "process_cpu_seconds_total" && w > a) {
				t.Errorf("%s: %v, %v, %v: not in order", name, b, w, a)
			}
		case "process_start_time_seconds":
			if math.Abs(b-w) > 1 { // the boot time in /proc/stat may move by a second
				t.Errorf("%s = %v, want %v", name, b, w)
			}
		case "process_max_fds", "process_virtual_memory_max_bytes":
			if b != w {
				t.Errorf("%s = %v, want %v", name, b, w)
			}
		case "process_open_fds":
			if math.Abs(b-w) > 4 {
				t.Errorf("%s = %v, want about %v", name, b, w)
			}
		default: // memory sizes
			if b <= 0 || b > 2*w || w > 2*b {
				t.Errorf("%s = %v, want about %v", name, b, w)
			}
		}
	}
	for name := range before {
		if _, ok := theirs[name]; !ok {
			t.Errorf("%s served, client_golang does not", name)
		}
	}
}

// /proc/self/net/netstat is read again once the last reading is
// netstatMaxAge old, or failed; a failed reading leaves the counters out.
func TestProcessCollectorNetstatAge(t *testing.T) {
	p, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	self, err := p.Proc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	c := newLinux(self, func() time.Time { return now })
	var reads int
	var fail bool
	c.readNetstat = func() (float64, float64, error) {
		reads++
		if fail {
			return 0, 0, errors.New("unreadable")
		}
		return float64(100 * reads), float64(10 * reads), nil
	}
	names := []string{"process_network_receive_bytes_total", "process_network_transmit_bytes_total"}
	want := func(in, out int) string {
		if in < 0 {
			return ""
		}
		return strings.NewReplacer("IN", strconv.Itoa(in), "OUT", strconv.Itoa(out)).Replace(`# HELP process_network_receive_bytes_total Number of bytes received by the process over the network.
# TYPE process_network_receive_bytes_total counter
process_network_receive_bytes_total IN
# HELP process_network_transmit_bytes_total Number of bytes sent by the process over the network.
# TYPE process_network_transmit_bytes_total counter
process_network_transmit_bytes_total OUT
`)
	}
	for i, step := range []struct {
		advance time.Duration
		fail    bool
		in, out int // -1: left out
		reads   int
	}{
		{0, false, 100, 10, 1},
		{netstatMaxAge / 2, false, 100, 10, 1},
		{netstatMaxAge/2 - time.Nanosecond, false, 100, 10, 1},
		{time.Nanosecond, false, 200, 20, 2},
		{netstatMaxAge, true, -1, -1, 3},
		{0, false, 400, 40, 4}, // a failure is retried at once
		{-time.Hour, false, 500, 50, 5},
	} {
		now = now.Add(step.advance)
		fail = step.fail
		if err := testutil.CollectAndCompare(c, strings.NewReader(want(step.in, step.out)), names...); err != nil {
			t.Errorf("step %d: %v", i, err)
		}
		if reads != step.reads {
			t.Errorf("step %d: %d readings, want %d", i, reads, step.reads)
		}
	}
}
