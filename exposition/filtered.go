package exposition

import (
	"fmt"
	"net/http"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Filtered returns a handler rendering c on every request (a scrape with
// collect[] or name[] filters, which the cache does not serve), together
// with the exporter's own metrics in self (nil for none).
func Filtered(c prometheus.Collector, self prometheus.Gatherer, logger log.Logger) (http.Handler, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering the collector: %w", err)
	}
	gatherers := prometheus.Gatherers{reg}
	if self != nil {
		gatherers = append(prometheus.Gatherers{self}, reg)
	}
	return promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{
		ErrorLog:      promLogger{logger},
		ErrorHandling: promhttp.ContinueOnError,
	}), nil
}

// promLogger lets promhttp log through go-kit.
type promLogger struct{ logger log.Logger }

func (l promLogger) Println(v ...any) {
	level.Error(l.logger).Log("msg", fmt.Sprint(v...))
}
