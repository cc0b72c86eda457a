package exposition

import (
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Self holds the exporter's own metrics, gathered on every scrape. It is a
// prometheus.Registerer and Gatherer whose collectors all sit behind one
// collector of one registry: a registry of several collectors gathers them
// on a goroutine each and yields the scrape's goroutine (runtime.Gosched)
// as it starts each one, which, while a snapshot is being rendered in the
// background, queues the scrape behind the rendering's goroutines. The
// registrations are checked by a second registry, as a registry's own
// would be (consistent descriptors, no duplicates).
type Self struct {
	reg   *prometheus.Registry // gathers all
	check *prometheus.Registry // checks each registration
	all   *collectorList
}

// collectorList is a collector running its members one after another.
type collectorList struct {
	mu sync.Mutex
	cs []prometheus.Collector
}

// Describe describes nothing: Self's registry takes the list unchecked,
// as its members are checked as they are registered.
func (l *collectorList) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (l *collectorList) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	cs := l.cs
	l.mu.Unlock()
	for _, c := range cs {
		c.Collect(ch)
	}
}

// Collector is Self's collectors as one prometheus.Collector (which
// describes nothing), for a renderer of collectors.
func (s *Self) Collector() prometheus.Collector { return s.all }

// NewSelf returns a Self holding cs; it panics where MustRegister would.
func NewSelf(cs ...prometheus.Collector) *Self {
	s := &Self{reg: prometheus.NewRegistry(), check: prometheus.NewRegistry(), all: &collectorList{}}
	s.reg.MustRegister(s.all)
	s.MustRegister(cs...)
	return s
}

// Register implements prometheus.Registerer.
func (s *Self) Register(c prometheus.Collector) error {
	if err := s.check.Register(c); err != nil {
		return err
	}
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	// A new slice: Collect iterates the old one without the lock.
	s.all.cs = append(s.all.cs[:len(s.all.cs):len(s.all.cs)], c)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (s *Self) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := s.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (s *Self) Unregister(c prometheus.Collector) bool {
	if !s.check.Unregister(c) {
		return false
	}
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	for i, m := range s.all.cs {
		if reflect.TypeOf(m) == reflect.TypeOf(c) && reflect.TypeOf(c).Comparable() && m == c {
			s.all.cs = append(s.all.cs[:i:i], s.all.cs[i+1:]...)
			break
		}
	}
	return true
}

// Gather implements prometheus.Gatherer.
func (s *Self) Gather() ([]*dto.MetricFamily, error) { return s.reg.Gather() }
