package procmetrics

import (
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
)

// netstatMaxAge bounds how old the process_network_* counters served by a
// scrape may be: /proc/self/net/netstat is read at most once per this
// interval, and by a scrape that finds the last reading older.
const netstatMaxAge = time.Second

// processCollector serves client_golang's process metrics (same names,
// help, types and values) at less cost per scrape, on Linux:
//
//   - process_cpu_seconds_total, process_virtual_memory_bytes and
//     process_resident_memory_bytes from /proc/self/stat, and
//     process_open_fds from /proc/self/fd, read on every scrape;
//   - process_max_fds and process_virtual_memory_max_bytes from
//     getrlimit(2) on every scrape (the soft limits /proc/self/limits
//     shows, without reading and parsing that file);
//   - process_start_time_seconds computed once (it cannot change; client_golang
//     reads the whole of /proc/stat for the boot time on each scrape);
//   - process_network_{receive,transmit}_bytes_total from
//     /proc/self/net/netstat, the most expensive of these files for the
//     kernel to produce (it covers the whole network namespace), read at
//     most once per netstatMaxAge.
//
// As client_golang's collector without ReportErrors, a metric whose
// source cannot be read is left out of that scrape.
type processCollector struct {
	proc  procfs.Proc
	now   func() time.Time
	start float64
	// startOK is false when the start time could not be read at
	// construction; it is then left out.
	startOK bool

	cpuTotal, openFDs, maxFDs, vsize, maxVsize, rss, startTime, inBytes, outBytes *prometheus.Desc

	// readNetstat returns the namespace's received and sent IP octets.
	readNetstat func() (in, out float64, err error)

	mu        sync.Mutex
	netAt     time.Time // when in, out were read; zero before the first reading
	netIn     float64
	netOut    float64
	netFailed bool // the last reading failed
}

// New returns the collector of this process's metrics; client_golang's
// where /proc cannot be read.
func New() prometheus.Collector {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return fallback()
	}
	p, err := fs.Proc(os.Getpid())
	if err != nil {
		return fallback()
	}
	return newLinux(p, time.Now)
}

func newLinux(p procfs.Proc, now func() time.Time) *processCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	c := &processCollector{
		proc:      p,
		now:       now,
		cpuTotal:  desc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds."),
		openFDs:   desc("process_open_fds", "Number of open file descriptors."),
		maxFDs:    desc("process_max_fds", "Maximum number of open file descriptors."),
		vsize:     desc("process_virtual_memory_bytes", "Virtual memory size in bytes."),
		maxVsize:  desc("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes."),
		rss:       desc("process_resident_memory_bytes", "Resident memory size in bytes."),
		startTime: desc("process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
		inBytes:   desc("process_network_receive_bytes_total", "Number of bytes received by the process over the network."),
		outBytes:  desc("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network."),
	}
	c.readNetstat = func() (float64, float64, error) {
		ns, err := p.Netstat()
		if err != nil {
			return 0, 0, err
		}
		var in, out float64
		if ns.InOctets != nil {
			in = *ns.InOctets
		}
		if ns.OutOctets != nil {
			out = *ns.OutOctets
		}
		return in, out, nil
	}
	if st, err := p.Stat(); err == nil {
		if t, err := st.StartTime(); err == nil {
			c.start, c.startOK = t, true
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpuTotal, c.openFDs, c.maxFDs, c.vsize, c.maxVsize, c.rss, c.startTime, c.inBytes, c.outBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	if st, err := c.proc.Stat(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.cpuTotal, prometheus.CounterValue, st.CPUTime())
		ch <- prometheus.MustNewConstMetric(c.vsize, prometheus.GaugeValue, float64(st.VirtualMemory()))
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(st.ResidentMemory()))
	}
	if c.startOK {
		ch <- prometheus.MustNewConstMetric(c.startTime, prometheus.GaugeValue, c.start)
	}
	if n, err := c.proc.FileDescriptorsLen(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.openFDs, prometheus.GaugeValue, float64(n))
	}
	var nofile, as syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile) == nil && syscall.Getrlimit(syscall.RLIMIT_AS, &as) == nil {
		// RLIM_INFINITY is the largest uint64, as procfs reads "unlimited".
		ch <- prometheus.MustNewConstMetric(c.maxFDs, prometheus.GaugeValue, float64(nofile.Cur))
		ch <- prometheus.MustNewConstMetric(c.maxVsize, prometheus.GaugeValue, float64(as.Cur))
	}
	if in, out, ok := c.netstat(); ok {
		ch <- prometheus.MustNewConstMetric(c.inBytes, prometheus.CounterValue, in)
		ch <- prometheus.MustNewConstMetric(c.outBytes, prometheus.CounterValue, out)
	}
}

// netstat returns the network counters, read again when the last reading
// is netstatMaxAge old or more (or failed).
func (c *processCollector) netstat() (in, out float64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.netAt.IsZero() || c.netFailed || now.Sub(c.netAt) >= netstatMaxAge || now.Before(c.netAt) {
		in, out, err := c.readNetstat()
		c.netAt, c.netFailed = now, err != nil
		if err == nil {
			c.netIn, c.netOut = in, out
		}
	}
	return c.netIn, c.netOut, !c.netFailed
}
