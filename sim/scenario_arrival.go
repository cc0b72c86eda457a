package sim

import (
	"slices"
	"strings"
)

// unreadArrivalKey refuses a key of arrival that its process does not read
// (burst_rate with poisson, rate with trace, any with training's closed
// loop): the run would go on as if it were not there.
func (p *parser) unreadArrivalKey(a *ArrivalSpec, at func(...any) []any) error {
	key, readBy := unreadArrival(a)
	switch {
	case key == "":
		return nil
	case a.Process == "closed":
		return p.errAt(at("arrival", key), "arrival.%s is for process %s; training runs closed-loop and reads no arrival", key, readBy)
	}
	return p.errAt(at("arrival", key), "arrival.%s is for process %s; process %s does not read it", key, readBy, a.Process)
}

// unreadArrival returns the first key given to a that its process does
// not read, with the processes that read it; "" when there is none.
func unreadArrival(a *ArrivalSpec) (key, readBy string) {
	for _, k := range []struct {
		key    string
		given  bool
		readBy []string
	}{
		{"rate", a.Rate != 0, []string{"poisson", "bursty"}},
		{"burst_rate", a.BurstRate != 0, []string{"bursty"}},
		{"burst_mean", a.BurstMean != 0, []string{"bursty"}},
		{"calm_mean", a.CalmMean != 0, []string{"bursty"}},
		{"file", a.File != "", []string{"trace"}},
		{"speedup", a.Speedup != 0, []string{"trace"}},
		{"no_loop", a.NoLoop, []string{"trace"}},
	} {
		if k.given && !slices.Contains(k.readBy, a.Process) {
			return k.key, strings.Join(k.readBy, " or ")
		}
	}
	return "", ""
}
